package runner

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
)

// passPrefill is a prefill model for tests with a fixed cost a pass, as a GPU's step reads its
// weights whatever its batch, and a cost per computed token.
type passPrefill struct{ passSeconds, secondsPerToken float64 }

func (m passPrefill) BatchSeconds(batch []serving.Tokens) float64 {
	if len(batch) == 0 {
		return 0
	}
	s := m.passSeconds
	for _, t := range batch {
		s += float64(t.New) * m.secondsPerToken
	}
	return s
}

// TestServingClockDefersAsItsIdeal: over a filled L3, at arrivals sparser than a step, nearly every
// request is deferred a step for its prefetch. The run's clock and its ideal price the step that
// serves it alike (the deferred request is served at once, not held for the next arrival), so
// measured over ideal stays near 1: when the run held a deferred request until the next arrival and
// the ideal did not defer it, it was 3 to 9.
func TestServingClockDefersAsItsIdeal(t *testing.T) {
	dir := sharedTempDir(t)
	for pass := range 2 {
		opts := l3Options(dir)
		serve := servingOptions().Serving
		// A pass of 200 ms of trace time, a request a second, spent 10 times faster: 2.4 s of wall
		// a pass.
		serve.RequestRate, serve.TimeScale = 1, 10
		tst := checked()
		tst.Prefill = passPrefill{passSeconds: 0.2, secondsPerToken: 20e-6}
		opts.Serving = serve
		// One turn a conversation, no flush: in the second pass each request's own turn is in the
		// L3 only.
		opts.Synthetic.Conversations, opts.Synthetic.TurnsMax, opts.Synthetic.TurnTokens,
			opts.Synthetic.FlushEvery = 24, 1, 96, 0
		r, err := runTesting(testJob(t), opts, tst)
		checkL3Run(t, "serving clock over an L3", r, err)
		if pass == 0 {
			continue
		}
		s := r.Serving
		if r.Hits.L3Tokens == 0 || s == nil || s.PrefetchWait.P99 < 0 {
			t.Fatalf("the second pass served no L3 hit under the clock: %+v", r.Hits)
		}
		// The machinery's real time adds to a measured step only where it overruns the modelled
		// one: a step's real work, tens of milliseconds on a loaded machine, hides under a 200 ms
		// pass.
		if s.MeasuredOverIdealP50 > 1.5 || s.MeasuredOverIdealP50 < 1 {
			t.Fatalf(
				"measured over ideal TTFT p50 %.2f (TTFT p50 %.1f ms, ideal %.1f ms, L3 prefetch wait p50 %.1f ms), want within [1, 1.5]",
				s.MeasuredOverIdealP50,
				1e3*s.TTFT.P50,
				1e3*s.IdealTTFT.P50,
				1e3*s.PrefetchWait.P50,
			)
		}
	}
	checkNoLeakedSegments(t)
}

// TestServingClockWithOneClient: one closed-loop client sends each request when the last one's
// first token came. CP rank 0 forms a step as the one before it begins, so the first token is known
// in time for the step after next: each request has its own step, with an empty one between two
// (the broadcast tells an empty step from the stream's end), and every request is timed, by the run
// and by its ideal, which follows the same rule.
func TestServingClockWithOneClient(t *testing.T) {
	opts := servingOptions()
	opts.Serving.RequestRate, opts.Serving.Clients, opts.Serving.ThinkSeconds = 0, 1, 0.002
	opts.Synthetic.FlushEvery = 0
	r, err := runTesting(testJob(t), opts, servingTesting())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Serving
	// Steps are summed over the groups, each 2n-1 for its n requests.
	if want := 2*r.Requests - int64(r.DP); s == nil || s.Requests != r.Requests || r.Steps != want {
		t.Fatalf("%+v: %d requests timed in %d steps, want %d steps", s, r.Requests, r.Steps, want)
	}
	if s.IdealTTFT.P50 <= 0 || s.IdealTTFT.P50 > s.TTFT.P50 {
		t.Fatalf(
			"TTFT p50 %g s, ideal %g s: want the ideal above 0 and no slower",
			s.TTFT.P50,
			s.IdealTTFT.P50,
		)
	}
	checkNoLeakedSegments(t)
}

// TestSweepsModelledL3: a virtual replay (a sweep's point) also gives its TTFT with an unbounded L3
// under the L2, the same from run to run, and a faster L3 never gives a later first token at p50 or
// p99.
func TestSweepsModelledL3(t *testing.T) {
	var got []*report.ModelledL3Serving
	// a 64-byte token: 64 ms or 0.6 us a 1,000-token read
	for _, rate := range []float64{1e6, 1e6, 1e11} {
		opts := servingOptions()
		opts.SyncCopies, opts.Serving.Virtual, opts.Serving.L3ReadBytesPerSecond = true, true, rate
		// Prompts of a few 512-token blocks, and a flush every 8 requests: the L3 holds what the L2
		// forgets. An L2 of 2048 slots of 16 tokens lets a step's prefetches hold 8 blocks (an
		// eighth of it: cache.PrefetchLimits); the default 160 slots would let none start.
		opts.L2Slots = 2048
		tst := checked()
		tst.Prefill = passPrefill{passSeconds: 0.01, secondsPerToken: 20e-6}
		opts.Synthetic.SystemPromptTokens, opts.Synthetic.TurnTokens, opts.Synthetic.TurnsMax,
			opts.Synthetic.FlushEvery = 1024, 256, 3, 8
		r, err := runTesting(testJob(t), opts, tst)
		if err != nil {
			t.Fatal(err)
		}
		if r.Serving == nil {
			t.Fatal("no serving report from a virtual replay")
		}
		// CP rank 0 replays its group's requests; a sweep is one process. World rank 0 checks,
		// after the runs, so that a failure on it leaves no rank waiting in a collective.
		got = append(got, r.Serving.ModelledL3)
	}
	if testWorld.Rank() != 0 {
		return
	}
	for _, l3 := range got {
		if l3 == nil || l3.L3Tokens == 0 {
			t.Fatalf("a virtual replay's modelled L3: %+v, want figures with tokens from it", l3)
		}
	}
	if *got[0] != *got[1] {
		t.Fatalf("two runs of one configuration: %+v, then %+v", *got[0], *got[1])
	}
	slow, fast := got[0], got[2]
	if fast.TTFT.P50 > slow.TTFT.P50 || fast.TTFT.P99 > slow.TTFT.P99 ||
		fast.TTFT.P99 == slow.TTFT.P99 && fast.TTFT.P50 == slow.TTFT.P50 {
		t.Fatalf(
			"an L3 at 100 GB/s: TTFT p50 %g s, p99 %g s; at 1 MB/s: p50 %g s, p99 %g s: want the faster one sooner",
			fast.TTFT.P50,
			fast.TTFT.P99,
			slow.TTFT.P50,
			slow.TTFT.P99,
		)
	}
}
