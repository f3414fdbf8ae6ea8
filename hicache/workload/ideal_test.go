package workload

import (
	"bytes"
	"slices"
	"testing"
)

func TestIdealHitTokensByHand(t *testing.T) {
	req := func(ids ...int32) Event { return Event{Request: Request{RID: "r", InputIDs: ids}} }
	events := []Event{
		req(1, 2, 3, 4, 5),       // nothing before it
		req(1, 2, 3, 4, 6, 7),    // pages (1 2) (3 4) shared: 4
		req(1, 2, 3, 9),          // page (1 2): 2 (the half page 9 never counts)
		req(1, 2),                // 2
		req(2, 1, 3, 4),          // 0: page (3 4) follows another first page
		{Flush: true},            //
		req(1, 2, 3, 4, 5, 6, 7), // 0 after the flush
		req(1, 2, 3, 4, 5, 6),    // 6
	}
	cfg := IdealConfig{PageTokens: 2, VocabSize: 10, BatchRequests: 3}
	if got := IdealHitTokens(events, cfg); got != 4+2+2+6 {
		t.Fatalf("ideal hit tokens %d, want 14", got)
	}
	// --flush-every 1 with one request a step: no request follows another without a flush between
	// them.
	cfg.BatchRequests, cfg.FlushEverySteps = 1, 1
	if got := IdealHitTokens(events, cfg); got != 0 {
		t.Fatalf("with a flush every step: %d, want 0", got)
	}
	// A serving clock's steps: the first two requests, then the next three, then one a step (past
	// StepEvents, BatchRequests again). --flush-every 1 leaves only the hits within a step: the
	// second's 4, the fourth's 2. What an unbounded store that outlives flushes could supply: the
	// flush forgets nothing.
	if got, want := SeenPrefixTokens(events, cfg), []int64{0, 4, 2, 2, 0, 4, 6}; !slices.Equal(
		got,
		want,
	) {
		t.Fatalf("seen prefixes %v, want %v", got, want)
	}
	cfg.StepEvents = []int{2, 3}
	if got := IdealHitTokens(events, cfg); got != 4+2 {
		t.Fatalf("by the clock's steps with a flush every step: %d, want 6", got)
	}
}

// bruteForceIdeal compares every request with every earlier one of the same flush epoch, token by
// token.
func bruteForceIdeal(events []Event, cfg IdealConfig) int64 {
	var epoch [][]int32 // prompts since the last flush
	var hits int64
	rest := events
	for step := int64(1); ; step++ {
		batch := TakeBatch(&rest, cfg.BatchRequests)
		if len(batch) == 0 {
			return hits
		}
		for _, e := range batch {
			if e.Flush {
				epoch = nil
				continue
			}
			tokens := e.Request.InputIDs
			if tokens == nil {
				tokens = e.Request.Blocks.AppendTokens(nil, cfg.VocabSize)
			}
			best := 0
			for _, earlier := range epoch {
				best = max(best, commonPrefix(tokens, earlier)/cfg.PageTokens*cfg.PageTokens)
			}
			hits += int64(best)
			epoch = append(epoch, tokens)
		}
		if cfg.FlushEverySteps > 0 && step%cfg.FlushEverySteps == 0 {
			epoch = nil
		}
	}
}

func TestIdealHitTokensMatchesABruteForceCount(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.FlushEvery = 40
	synthetic := mustGenerate(t, cfg)
	var trace bytes.Buffer
	if err := WriteMooncakeTrace(&trace, synthetic, 16); err != nil {
		t.Fatal(err)
	}
	compact, err := ReadTraceAs(
		&trace,
		"gen.jsonl",
		TraceOptions{VocabSize: cfg.VocabSize, BlockTokens: 16},
	)
	if err != nil {
		t.Fatal(err)
	}
	for name, events := range map[string][]Event{"tokens": synthetic, "compact": compact} {
		for _, ic := range []IdealConfig{
			{PageTokens: 16, VocabSize: cfg.VocabSize, BatchRequests: 4},
			{PageTokens: 5, VocabSize: cfg.VocabSize, BatchRequests: 3, FlushEverySteps: 7},
			{PageTokens: 64, VocabSize: cfg.VocabSize, BatchRequests: 1},
		} {
			got, want := IdealHitTokens(events, ic), bruteForceIdeal(events, ic)
			if got != want || want == 0 {
				t.Errorf(
					"%s %+v: ideal %d, brute force %d (want equal and > 0)",
					name,
					ic,
					got,
					want,
				)
			}
		}
	}
}

// TestIdealHitsByRequestIsTheIdealOfEachPrefix: element k-1 is the ideal of the workload cut after
// its k-th request, so that a replay that ended part-way is held to the ideal of what it served
// (issue 34's 788.7%).
func TestIdealHitsByRequestIsTheIdealOfEachPrefix(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.FlushEvery = 40
	events := mustGenerate(t, cfg)
	ic := IdealConfig{
		PageTokens:      16,
		VocabSize:       cfg.VocabSize,
		BatchRequests:   3,
		FlushEverySteps: 5,
	}
	byRequest := IdealHitsByRequest(events, ic)
	requests := 0
	for i, e := range events {
		if e.Flush {
			continue
		}
		requests++
		if requests%7 != 0 && requests != len(byRequest) {
			continue
		}
		if got, want := byRequest[requests-1], IdealHitTokens(events[:i+1], ic); got != want {
			t.Fatalf("after %d requests: %d, the ideal of the cut workload %d", requests, got, want)
		}
	}
	if requests != len(byRequest) || byRequest[len(byRequest)-1] != IdealHitTokens(events, ic) ||
		byRequest[len(byRequest)-1] == 0 {
		t.Fatalf(
			"%d requests, %d cumulative counts, last %d, whole ideal %d",
			requests,
			len(byRequest),
			byRequest[len(byRequest)-1],
			IdealHitTokens(events, ic),
		)
	}
}
