package serving

import (
	"fmt"
	"math"
)

// A request whose prefix continues in the L3 is served one step after the step it was formed into:
// its prefetch starts in that step and the step's consensus agrees which blocks arrived, so every
// rank serves it from the same blocks (DESIGN.md, "The L3 tier"). That is the design's rule, not
// the machinery's cost, so both clocks keep it: the run's, which measures, and the virtual one,
// whose ideal then differs from the run only by what the machinery costs. PlanStep is the one place
// that prices such a step; both clocks call it.

// Pass is the modelled GPUs' work on one group of requests: it begins, loads (the L3 reads still
// waited for, the load-backs), computes from ComputeStartNs in Forwards forward passes back to back
// (more than one when its new tokens exceed the budget: chunked prefill, Chunk), and ends at EndNs,
// the last forward pass's end. Requests are its requests' own, in the order they were given: each
// one's first token comes at the end of the forward pass that computed its last new token.
type Pass struct {
	StartNs, ComputeStartNs, EndNs int64
	Forwards                       int
	Requests                       []Chunks
}

// Chunks is one request's share of its pass: how many forward passes its new tokens spanned (1
// unless it was chunked) and when the last of them ended, its first token.
type Chunks struct {
	Chunks       int
	FirstTokenNs int64
}

// StepPlan is one step on the modelled clock: the pass of the requests the step before kept waiting
// for their prefetch (Deferred), and the pass of the step's own requests (Batch). Most steps have
// one pass, Batch, with every request of the step in it, the deferred ones first; a step whose own
// requests arrive after the group is free, with requests waiting for their prefetch, has two:
// those are served at once, as an engine would run a step of them rather than hold them until the
// next arrival, and the step's own requests when they come.
type StepPlan struct {
	Deferred, Batch Pass
	TwoPasses       bool
	// deferredInBatch: the deferred requests at the head of Batch.Requests (one pass)
	deferredInBatch int
}

// EndNs is when the step's last pass ends.
func (p StepPlan) EndNs() int64 { return p.Batch.EndNs }

// PassOf is the pass that served a request: a deferred one's, or the step's own (every request's in
// a step of one pass).
func (p StepPlan) PassOf(deferred bool) Pass {
	if deferred && p.TwoPasses {
		return p.Deferred
	}
	return p.Batch
}

// Request is the i-th request of StepInput.Deferred (deferred) or of StepInput.Batch: the pass that
// served it, and its own chunks and first token in it.
func (p StepPlan) Request(deferred bool, i int) (Pass, Chunks) {
	pass := p.PassOf(deferred)
	if !deferred {
		i += p.deferredInBatch
	}
	return pass, pass.Requests[i]
}

// MaxStepSeconds bounds a step's modelled time, its passes' loads and compute (not the idle wait
// between them): 1e6 s, 11.6 days. No prefill step is that long: the longest the tables give is
// 2.5 times shorter (a 1M-token GLM-4.5 prompt loaded at the rate floor, 1 MB/s: 4.6 days) and a
// cold 1M-token prefill of DeepSeek-V3 on one H20 at the default efficiency 27 times (10.5 hours).
// A longer one comes from a rate or an efficiency out by orders of magnitude (a host link of 5
// bytes/s: a 100K-token load-back of 83 years), which the run clock would spend on the wall, a
// hang; Check refuses it.
const MaxStepSeconds = 1e6

// Check refuses a step whose passes' modelled loads and compute together pass MaxStepSeconds,
// saying how long each is and which flags set them.
func (p StepPlan) Check() error {
	var loadNs, computeNs float64
	for _, pass := range []Pass{p.Deferred, p.Batch} { // a one-pass step's Deferred is empty
		loadNs += float64(pass.ComputeStartNs - pass.StartNs)
		computeNs += float64(pass.EndNs - pass.ComputeStartNs)
	}
	seconds := (loadNs + computeNs) / 1e9
	if seconds <= MaxStepSeconds {
		return nil
	}
	return fmt.Errorf(
		"a step's modelled time is %s (loads %.3g s, compute %.3g s), over the bound of %g s "+
			"(11.6 days) that no prefill step reaches: a rate or an efficiency is out by orders "+
			"of magnitude; check --host-link-rate, --l3-read-rate, --prefill-efficiency, "+
			"--prefill-profile and --prefill-dtype",
		describeLong(seconds),
		loadNs/1e9,
		computeNs/1e9,
		float64(MaxStepSeconds),
	)
}

// describeLong writes a long time in seconds with its years or days: "2.62e+09 s, 83 years".
func describeLong(seconds float64) string {
	const day, year = 86400.0, 365.25 * 86400
	if seconds >= float64(math.MaxInt64)/1e9 {
		return "over 292 years (past int64 nanoseconds)"
	}
	if seconds >= year {
		return fmt.Sprintf("%.3g s, %.3g years", seconds, seconds/year)
	}
	return fmt.Sprintf("%.3g s, %.3g days", seconds, seconds/day)
}

// IdleNs is the time between the step's two passes, when the group waited for the step's own
// requests.
func (p StepPlan) IdleNs() int64 {
	if !p.TwoPasses {
		return 0
	}
	return max(0, p.Batch.StartNs-p.Deferred.EndNs)
}

// StepInput is what PlanStep prices. Times are trace nanoseconds.
type StepInput struct {
	// FreeNs is when the group is free: the last step's end.
	FreeNs int64
	// BatchStartNs is the earliest time the step's own requests allow it to begin (Batching.Take's
	// start).
	BatchStartNs int64
	// Deferred are the hits of the requests the step before kept waiting for their prefetch, served
	// now; their L3 reads began at DeferredSinceNs (the start of that step's pass).
	Deferred        []Hit
	DeferredSinceNs int64
	// Batch are the hits of the step's own requests served in it (not those it defers to the next
	// step).
	Batch []Hit
	// LoadsReadyNs is when the real load-backs finished (the run's clock; 0 on the virtual one): no
	// pass computes before it.
	LoadsReadyNs int64
	// ChunkTokens is the most new tokens one forward pass computes: Batching.StepTokens, chunked
	// prefill's budget, on both clocks. 0 computes each pass in one forward pass, whatever its
	// size.
	ChunkTokens int64
	// Shape is how the step passes its deferred requests: by the rule (the clocks that form their
	// steps), or as a run's step did (ReplaySteps).
	Shape Shape
}

// Add puts a served request into the step, in the core's order (the requests the step before
// deferred first, then the step's own, as VirtualReplay orders them), and says its place in
// Deferred or Batch. A deferred request's L3 read began when the step it was first formed into
// did (firstStartNs), so the step's deferred reads count from the earliest of those. The runner's
// clock and the simulator's build their steps by it, so the two cannot order a step apart.
func (in *StepInput) Add(h Hit, deferred bool, firstStartNs int64) (slot int) {
	if !deferred {
		in.Batch = append(in.Batch, h)
		return len(in.Batch) - 1
	}
	in.Deferred = append(in.Deferred, h)
	in.DeferredSinceNs = min(in.DeferredSinceNs, firstStartNs)
	return len(in.Deferred) - 1
}

// Shape is how PlanStep passes a step with deferred requests.
type Shape int

const (
	// ShapeByArrival is the rule: one pass, the deferred requests first, when the step's own
	// requests may begin by the time the group is free (or none is deferred); two otherwise.
	ShapeByArrival Shape = iota
	// ShapeOnePass serves the deferred requests in the step's own pass, whenever that begins.
	ShapeOnePass
	// ShapeTwoPasses serves the deferred requests in a pass of their own when the group is free,
	// and the step's own after it (one pass when none is deferred).
	ShapeTwoPasses
)

// twoPasses says whether the step runs its deferred requests in a pass of their own.
func (in StepInput) twoPasses() bool {
	if len(in.Deferred) == 0 {
		return false
	}
	switch in.Shape {
	case ShapeOnePass:
		return false
	case ShapeTwoPasses:
		return true
	}
	return in.BatchStartNs > in.FreeNs
}

// PlanStep prices a step in a GPU's order (ChunkedCost): each pass waits for the L3 reads its
// requests still need (counted from when they began, so a deferred request has already spent part
// of its read), then the load-backs, all of them before its first forward pass, then computes its
// forward passes back to back, chunked by ChunkTokens. Every time it gives is a non-decreasing
// function of FreeNs, BatchStartNs, DeferredSinceNs and LoadsReadyNs while the step's shape holds:
// a step that may begin no later ends no later (ReplaySteps' floor rests on it).
func PlanStep(p Prefill, l Links, in StepInput) StepPlan {
	start := max(in.FreeNs, in.BatchStartNs)
	if !in.twoPasses() {
		// One pass: the deferred requests join the step's own, ahead of them.
		hits := append(
			append(make([]Hit, 0, len(in.Deferred)+len(in.Batch)), in.Deferred...),
			in.Batch...)
		since := start
		if len(in.Deferred) > 0 {
			since = min(since, in.DeferredSinceNs)
		}
		batch := pass(p, l, in.ChunkTokens, hits, start, since, in.LoadsReadyNs)
		return StepPlan{
			Deferred:        Pass{StartNs: start, ComputeStartNs: start, EndNs: start},
			Batch:           batch,
			deferredInBatch: len(in.Deferred),
		}
	}
	deferred := pass(
		p,
		l,
		in.ChunkTokens,
		in.Deferred,
		in.FreeNs,
		min(in.FreeNs, in.DeferredSinceNs),
		in.LoadsReadyNs,
	)
	start = max(in.BatchStartNs, deferred.EndNs)
	return StepPlan{
		Deferred:  deferred,
		Batch:     pass(p, l, in.ChunkTokens, in.Batch, start, start, in.LoadsReadyNs),
		TwoPasses: true,
	}
}

// pass prices one pass of hits beginning at startNs whose L3 reads began at sinceNs: its loads,
// then its forward passes of at most chunkTokens new tokens each (Chunk).
func pass(
	p Prefill,
	l Links,
	chunkTokens int64,
	hits []Hit,
	startNs, sinceNs, loadsReadyNs int64,
) Pass {
	loads := loadCost(l, hits)
	l3Left := max(0, addNs(sinceNs, Nanoseconds(loads.L3ReadSeconds))-startNs)
	computeStart := max(addNs(addNs(startNs, l3Left), Nanoseconds(loads.LoadSeconds)), loadsReadyNs)
	f := Chunk(tokensOf(hits), chunkTokens)
	ends := make([]int64, len(f.Passes))
	end := computeStart
	for k, seconds := range f.Seconds(p) {
		end = addNs(end, Nanoseconds(seconds))
		ends[k] = end
	}
	out := Pass{
		StartNs:        startNs,
		ComputeStartNs: computeStart,
		EndNs:          end,
		Forwards:       len(f.Passes),
		Requests:       make([]Chunks, len(hits)),
	}
	for i := range hits {
		out.Requests[i] = Chunks{Chunks: f.Chunks[i], FirstTokenNs: ends[f.Last[i]]}
	}
	return out
}
