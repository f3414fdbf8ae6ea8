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
// it forms the step, up to StepTokens prompt tokens (chunked prefill's budget, as SGLang's and
// vLLM's schedulers keep one) and MaxRequests requests. A request longer than the budget goes
// alone: its prefill is modelled as its chunks back to back, with no other request between them (a
// real chunked prefill would let the next requests share its last chunk's step).
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
