package workload

import "github.com/cphicache/cphicache/pool"

// IdealConfig is how a replay cuts and flushes a replica's events, so the ideal count resets where
// the cache does.
type IdealConfig struct {
	PageTokens      int   // the cache keeps whole pages only
	VocabSize       int   // to expand compact requests
	BatchRequests   int   // requests per step (TakeBatch)
	FlushEverySteps int64 // the replay's own flush after every N steps (--flush-every); 0 = none
	// StepEvents, when not nil, are the events of each step as the replay cut them (a serving clock
	// forms its steps from arrivals and a token budget, not BatchRequests at a time; a step may
	// hold none); past its end, BatchRequests again.
	StepEvents []int
}

// IdealHitTokens is the prompt tokens an unbounded cache would serve from cache over a replica's
// events: for each request, the longest prefix of its whole pages (PageTokens each, as the cache
// counts: a page is shared when it and every page before it are equal) that any earlier request
// since the last flush also began with, summed. Flushes are the events' own and the replay's every
// FlushEverySteps steps, counted as the replay counts steps. No capacity, eviction or write policy
// limits it, so a replay's L1 + L2 hit tokens never exceed it.
func IdealHitTokens(events []Event, cfg IdealConfig) int64 {
	byRequest := IdealHitsByRequest(events, cfg)
	if len(byRequest) == 0 {
		return 0
	}
	return byRequest[len(byRequest)-1]
}

// IdealHitsByRequest is IdealHitTokens after each request, in the events' order: element i counts
// requests 0..i. A replay that ended part-way (a failure) compares its hits with the ideal of the
// requests it served, not of the whole workload, whose prompt tokens it never saw.
func IdealHitsByRequest(events []Event, cfg IdealConfig) []int64 {
	seen := map[uint64]struct{}{} // hashes of every whole-page prefix seen since the last flush
	var hits int64
	var byRequest []int64
	EachRequest(events, cfg, func(tokens []int32) {
		hits += idealHit(seen, tokens, cfg.PageTokens)
		byRequest = append(byRequest, hits)
	}, func() { clear(seen) })
	return byRequest
}

// EachRequest visits a replica's requests in the order a replay serves them, each with its tokens
// (compact ones expanded into a buffer reused for the next), and calls flush wherever the replay
// empties its cache: at the events' own flushes and after every FlushEverySteps steps, counted as
// the replay counts steps (BatchRequests, or StepEvents, a step). IdealHitTokens and the offline
// bound (hicache/bound) cut a replica's events by it, so both reset where the cache does.
func EachRequest(events []Event, cfg IdealConfig, visit func(tokens []int32), flush func()) {
	var scratch []int32
	rest := events
	for step := int64(1); ; step++ {
		n, batch := cfg.BatchRequests, []Event(nil)
		if step <= int64(len(cfg.StepEvents)) {
			n = cfg.StepEvents[step-1]
		}
		if n > 0 || step > int64(len(cfg.StepEvents)) {
			if batch = TakeBatch(&rest, n); len(batch) == 0 {
				return
			}
		}
		for i := range batch {
			if batch[i].Flush {
				flush()
				continue
			}
			tokens := batch[i].Request.InputIDs
			if tokens == nil && batch[i].Request.Blocks.Compact() {
				scratch = batch[i].Request.Blocks.AppendTokens(scratch[:0], cfg.VocabSize)
				tokens = scratch
			}
			visit(tokens)
		}
		if cfg.FlushEverySteps > 0 && step%cfg.FlushEverySteps == 0 {
			flush()
		}
	}
}

// idealHit counts tokens' whole pages whose prefix is in seen, then adds all of its page prefixes.
// A prefix is a 64-bit hash chained over every token before it, so after the first page not seen no
// later one is (but for a collision, about n^2/2^65 over n prefixes, which could only add a page to
// the count).
func idealHit(seen map[uint64]struct{}, tokens []int32, pageTokens int) int64 {
	var hit int64
	h := uint64(0x9e3779b97f4a7c15)
	for start := 0; start+pageTokens <= len(tokens); start += pageTokens {
		for _, t := range tokens[start : start+pageTokens] {
			h = pool.Mix64(h ^ uint64(uint32(t)))
		}
		if _, ok := seen[h]; ok {
			hit += int64(pageTokens)
		} else {
			seen[h] = struct{}{}
		}
	}
	return hit
}

// SeenPrefixTokens is, for each request in the events' order, the longest prefix of its whole pages
// (PageTokens each) that any earlier request began with, flushes or not: what an unbounded store
// that outlives flushes (a modelled L3 holding every block written before) could supply to it.
func SeenPrefixTokens(events []Event, cfg IdealConfig) []int64 {
	seen := map[uint64]struct{}{}
	var out []int64
	var scratch []int32
	for i := range events {
		if events[i].Flush {
			continue
		}
		tokens := events[i].Request.InputIDs
		if tokens == nil && events[i].Request.Blocks.Compact() {
			scratch = events[i].Request.Blocks.AppendTokens(scratch[:0], cfg.VocabSize)
			tokens = scratch
		}
		out = append(out, idealHit(seen, tokens, cfg.PageTokens))
	}
	return out
}
