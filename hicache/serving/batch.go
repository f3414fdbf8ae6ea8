package serving

// Queued is one event of a replica's workload as CP rank 0's queue sees it, in arrival order: a
// request's arrival and prompt length, or a flush (which goes alone, as in a replay without the
// clock).
type Queued struct {
	ArrivalNs    int64
	PromptTokens int64
	Flush        bool
}

// Batching is how CP rank 0 forms a step: requests in arrival order, as many as have arrived when
// it forms the step, up to StepTokens prompt tokens and MaxRequests requests; a request longer than
// the budget goes alone. StepTokens is also chunked prefill's budget, as SGLang's
// --chunked-prefill-size and vLLM's max_num_batched_tokens are: PlanStep computes a step in forward
// passes of at most StepTokens new tokens (Chunk), so a request with more new tokens than that runs
// in chunks over consecutive forward passes of its step, each attending over the chunks before it,
// and its first token comes at its last chunk's end. The requests after it wait for the next step,
// where an engine would let them fill its last chunk's forward pass (SERVING.md, its limits).
type Batching struct {
	StepTokens  int64
	MaxRequests int
}

// Take says how many events at the head of queue form the next step when it is formed at trace time
// formNs, and the earliest time that step may begin: formNs, or the next arrival's when none has
// arrived by then (the group idles until it). A flush at the head goes alone. An empty queue takes
// nothing.
//
// The budget counts prompt tokens, not the tokens left to compute: the batch is formed before the
// cache is looked up (the core serves it), so a step of cache hits holds no more requests than a
// step of misses.
func (b Batching) Take(queue []Queued, formNs int64) (n int, startNs int64) {
	if len(queue) == 0 {
		return 0, formNs
	}
	if queue[0].Flush {
		return 1, formNs
	}
	startNs = max(formNs, queue[0].ArrivalNs)
	var tokens int64
	for n < len(queue) && n < b.MaxRequests {
		q := queue[n]
		if q.Flush || q.ArrivalNs > startNs || (n > 0 && tokens+q.PromptTokens > b.StepTokens) {
			break
		}
		tokens += q.PromptTokens
		n++
	}
	return n, startNs
}
