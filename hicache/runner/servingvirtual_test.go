package runner

import (
	"reflect"
	"testing"

	"github.com/cphicache/cphicache/hicache/serving"
)

// TestVirtualClockFormsTheServingClocksSteps: a virtual run (a sweep's point) forms its steps as the
// serving clock forms them (serving.Batching.Take over the arrivals, on a clock whose steps last
// their modelled time), not --batch-requests at a time, so its hits are those of the steps a run
// serves. Its own clock then times every request exactly as the virtual replay of its hits does:
// with arrivals, and with closed-loop clients, whose sends follow the first tokens.
func TestVirtualClockFormsTheServingClocksSteps(t *testing.T) {
	for _, clients := range []int{0, 3} {
		opts := servingOptions()
		opts.SyncCopies, opts.Serving.Virtual = true, true
		opts.BatchRequests = 1 // the clock's steps hold several requests: a batch of one would not
		if clients > 0 {
			opts.Serving.Clients, opts.Serving.RequestRate = clients, 0
		}
		tst := servingTesting()
		var measured, ideal []serving.Timing
		tst.ServingTimings = func(m, i []serving.Timing) { measured, ideal = m, i }
		job := testJob(t)
		r, err := runTesting(job, opts, tst)
		if err != nil {
			t.Fatal(err)
		}
		if job.Topo.CPRank != 0 {
			continue
		}
		if len(measured) == 0 || !reflect.DeepEqual(measured, ideal) {
			t.Fatalf("%d clients: the virtual run's own clock timed %d requests unlike the virtual replay of its hits (%d): first %v, replay %v",
				clients, len(measured), len(ideal), first(measured), first(ideal))
		}
		t.Logf("%d clients: %d requests timed, %d steps, %d requests", clients, len(measured), r.Steps, r.Requests)
		if r.Steps >= r.Requests {
			t.Errorf("%d clients: %d requests in %d steps: the virtual run formed a step a request, "+
				"as --batch-requests 1 would, not the clock's", clients, r.Requests, r.Steps)
		}
	}
}

func first(t []serving.Timing) []serving.Timing { return t[:min(3, len(t))] }

// TestModelledL3PrefetchesByTheCoresRule: the modelled L3 reads no more than a run's L3 could: a
// prefetch at most half the L2 (cache.PrefetchLimits), a step's prefetches together at most an
// eighth, from the block the request's L1 and L2 hits end in, never the prompt's last token. An L2
// of 1024 slots of 16 tokens holds 32 blocks of 512: a prefetch may read 16, a step 4.
func TestModelledL3PrefetchesByTheCoresRule(t *testing.T) {
	p := newModelledPrefetch(1024, 16)
	long := serving.Hit{PromptTokens: 100_000, L2: 700}
	// 700 tokens served: the prefetch starts at block 1 (tokens 512 on) and may read 4 blocks
	if got, want := p.hit(5, long, 90_000), int64(5*512-700); got != want {
		t.Errorf("a long request's L3 hit: %d tokens, want %d (4 blocks, the step's backlog)", got, want)
	}
	if got := p.hit(5, long, 90_000); got != 0 {
		t.Errorf("a second prefetch in the same step: %d tokens, want none (the backlog is held)", got)
	}
	if got, want := p.hit(6, serving.Hit{PromptTokens: 2048}, 4096), int64(2047); got != want {
		t.Errorf("the next step's short request: %d tokens, want %d (all but its last token)", got, want)
	}
	wide := newModelledPrefetch(1<<20, 16) // 2048 blocks a prefetch, 512 a step
	if got, want := wide.hit(1, long, 90_000), int64(175*512-700); got != want {
		t.Errorf("a large L2's long request: %d tokens, want %d (the 175 blocks the L3 holds)", got, want)
	}
}
