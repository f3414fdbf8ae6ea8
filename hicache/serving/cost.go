package serving

// Tokens is one request's prompt as a step serves it: the tokens the model computes and the tokens
// its cache supplied (from L1, loaded back from L2, or read from the L3 and loaded back).
type Tokens struct {
	New, Cached int64
}

// Prefill is a prefill cost model: the seconds the CP group's GPUs take to prefill one step's batch
// (a roofline of the model on the GPU, or the user's measured profile).
type Prefill interface {
	BatchSeconds(batch []Tokens) float64
}

// Links are the rates a step's loads move at, in bytes per second, and the bytes they move: what
// the model's KV costs, not what a run with scaled-down copies copies.
type Links struct {
	// HostBytesPerSecond is one GPU's host link, host to device: each GPU of the group loads its
	// ranks' share of a load-back over its own link, all at once.
	HostBytesPerSecond float64
	// L3BytesPerSecond is one node's L3 read rate: a group over k nodes reads 1/k of each block on
	// each.
	L3BytesPerSecond float64
	// KVBytesPerToken is the model's KV of one token, every layer and payload, every CP rank's
	// share.
	KVBytesPerToken int64
	GPUs            int // the CP group's GPUs (its ranks)
	Nodes           int // the nodes the CP group spans
	// WholeCopies models per-rank copies, the design the shared L2 replaces: every rank keeps
	// whole copies in its own pool, so each GPU loads a hit's whole KV over its own link, not its
	// 1/GPUs share (docs/SIZING.md, "What sharing buys").
	WholeCopies bool
}

// LoadSeconds is the modelled time to load tokens' KV from host memory into the group's GPUs.
func (l Links) LoadSeconds(tokens int64) float64 {
	if tokens <= 0 || l.HostBytesPerSecond <= 0 {
		return 0
	}
	gpus := max(l.GPUs, 1)
	if l.WholeCopies {
		gpus = 1
	}
	return float64(tokens) * float64(l.KVBytesPerToken) / float64(gpus) / l.HostBytesPerSecond
}

// L3ReadSeconds is the modelled time to read tokens' KV from the L3 into host memory (before it is
// loaded).
func (l Links) L3ReadSeconds(tokens int64) float64 {
	if tokens <= 0 || l.L3BytesPerSecond <= 0 {
		return 0
	}
	return float64(
		tokens,
	) * float64(
		l.KVBytesPerToken,
	) / float64(
		max(l.Nodes, 1),
	) / l.L3BytesPerSecond
}

// Hit is what a request's cache supplied, by tier, in tokens; the rest of its prompt is computed.
type Hit struct {
	PromptTokens, L1, L2, L3 int64
}

// Tokens is the request as the prefill model sees it. A full-prefix hit still computes its last
// token, attending over the rest, since the first output token needs that token's logits: vLLM
// caps a cache hit at the prompt's length less one (PREFILL.md, "Hits"). So a full hit is never
// free.
func (h Hit) Tokens() Tokens {
	cached := h.L1 + h.L2 + h.L3
	if hitLeavesL1Out() { // false but under a simbugs build's deliberate bug (bugs_on.go)
		cached -= h.L1
	}
	if h.PromptTokens > 0 && cached >= h.PromptTokens {
		cached = h.PromptTokens - 1
	}
	return Tokens{New: h.PromptTokens - cached, Cached: cached}
}

// StepCost is a step's modelled time, in the order a GPU pays it: the L3 reads its requests still
// wait for, the load-backs from host memory, then the prefill, which needs them all.
type StepCost struct {
	L3ReadSeconds, LoadSeconds, PrefillSeconds float64
}

// Seconds is the whole step.
func (s StepCost) Seconds() float64 { return s.L3ReadSeconds + s.LoadSeconds + s.PrefillSeconds }

// Cost prices a step's requests computed in one forward pass, whatever their size (the prefill
// model's price of the batch). L3 hits are read from the L3 and then loaded back like L2 hits; L1
// hits cost nothing to move.
func Cost(p Prefill, l Links, hits []Hit) StepCost { return ChunkedCost(p, l, hits, 0) }

// ChunkedCost prices a step's requests as PlanStep computes them: the loads, then forward passes of
// at most chunkTokens new tokens each (Chunk), PrefillSeconds their sum.
func ChunkedCost(p Prefill, l Links, hits []Hit, chunkTokens int64) StepCost {
	c := loadCost(l, hits)
	for _, seconds := range Chunk(tokensOf(hits), chunkTokens).Seconds(p) {
		c.PrefillSeconds += seconds
	}
	return c
}

// loadCost is a step's loads: the L3 reads, and the load-backs of its L2 and L3 hits.
func loadCost(l Links, hits []Hit) StepCost {
	var loaded, read int64
	for _, h := range hits {
		loaded += h.L2 + h.L3
		read += h.L3
	}
	if l3ReadFree() { // false but under a simbugs build's deliberate bug (bugs_on.go)
		read = 0
	}
	return StepCost{L3ReadSeconds: l.L3ReadSeconds(read), LoadSeconds: l.LoadSeconds(loaded)}
}

// tokensOf is the requests as the prefill model sees them, in order.
func tokensOf(hits []Hit) []Tokens {
	out := make([]Tokens, len(hits))
	for i, h := range hits {
		out[i] = h.Tokens()
	}
	return out
}
