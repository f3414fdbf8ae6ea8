package serving

import "math"

// Chunked prefill (SERVING.md, its paragraph of that name): an engine computes at most a budget of
// new tokens in one forward pass, SGLang's --chunked-prefill-size (8192 by default on large GPUs)
// and vLLM's max_num_batched_tokens. A request whose new tokens do not fit what is left of the
// budget is cut there, and the next forward pass continues it first: SGLang's
// PrefillAdder.add_one_req truncates it to rem_chunk_tokens and add_chunked_req puts its rest first
// in the next batch (python/sglang/srt/managers/schedule_policy.py); vLLM's Scheduler.schedule
// gives every request min(its new tokens, token_budget), the running ones (a chunked prefill among
// them) first (vllm/v1/core/sched/scheduler.py). Each chunk is a forward pass over the model's
// weights that attends over the request's cached prefix and its chunks before it: it is priced as
// Tokens{New: the chunk, Cached: the prefix and the earlier chunks}, so a chunked prompt pays its
// weights once a chunk, its KV read again by every later chunk, and, for an MLA model whose chunk
// takes the expanded path, the expansion of its prefix and earlier chunks' latents again.
//
// The budget is the step's (Batching.StepTokens), a replicated flag, and a pass's requests and
// their hits are the same on every rank: the chunks are a pure function of replicated state, which
// every rank computes alike, as it computes the rest of PlanStep.

// Forwards is how one pass's requests are computed: its forward passes in order, and where each
// request's new tokens went.
type Forwards struct {
	// Passes are the forward passes, each the chunks it computes (at most the budget's new tokens
	// in all).
	Passes [][]Tokens
	// Last is, by request, the index in Passes of the forward pass that computes its last new
	// token: its first token comes at that pass's end. Chunks is, by request, how many forward
	// passes its new tokens span: 1 unless it was cut.
	Last, Chunks []int
}

// Chunk packs requests, in their order, into forward passes of at most budgetTokens new tokens, a
// request that does not fit what is left of the budget cut at it and continued in the next
// forward pass. A budget of 0 or less puts them all in one forward pass, whatever its size. So
// requests whose new tokens fit the budget together are one forward pass of exactly their Tokens,
// as before chunking. A request with no new token (none after a hit: Hit.Tokens computes at least
// one) joins the forward pass open when it comes.
func Chunk(reqs []Tokens, budgetTokens int64) Forwards {
	if budgetTokens <= 0 {
		budgetTokens = math.MaxInt64
	}
	f := Forwards{Last: make([]int, len(reqs)), Chunks: make([]int, len(reqs))}
	var room int64 // new tokens left to the open forward pass
	open := func() {
		f.Passes = append(f.Passes, nil)
		room = budgetTokens
	}
	for i, t := range reqs {
		if len(f.Passes) == 0 || (room == 0 && t.New > 0) {
			open()
		}
		first := len(f.Passes) - 1
		// Bounded: each turn but the last fills a forward pass of budgetTokens >= 1.
		for done := int64(0); ; open() {
			n := min(t.New-done, room)
			last := len(f.Passes) - 1
			f.Passes[last] = append(f.Passes[last], Tokens{New: n, Cached: t.Cached + done})
			done, room = done+n, room-n
			if done >= t.New {
				break
			}
		}
		f.Last[i] = len(f.Passes) - 1
		f.Chunks[i] = f.Last[i] - first + 1
	}
	return f
}

// Seconds prices each forward pass with p, in order.
func (f Forwards) Seconds(p Prefill) []float64 {
	out := make([]float64, len(f.Passes))
	for k, pass := range f.Passes {
		out[k] = p.BatchSeconds(pass)
	}
	return out
}
