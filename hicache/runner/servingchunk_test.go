package runner

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/serving"
)

// TestServingClockChunksALongPrompt: with --step-tokens below every prompt, each step holds one
// request and computes it in forward passes of at most the budget's new tokens (chunked prefill):
// a chunked request's compute lasts a pass's fixed cost a chunk, its first token comes at its last
// chunk's end, and the report and the summary say how many were chunked. The run's clock prices
// the chunks with the ideal's function: every request of every step arrives at once, so both form
// the same steps; the ideal is a floor for every request, and where no step's real work overran
// its modelled time (a pass of a second of trace time, spent 1000 times faster), the two clocks
// agree to the nanosecond. A large L1 leaves no load-back whose real time would delay a pass.
func TestServingClockChunksALongPrompt(t *testing.T) {
	opts := servingOptions()
	opts.DevicePages, opts.Synthetic.FlushEvery = 4096, 0 // a flush's real time is all overrun
	opts.Serving.Batching.StepTokens = 64
	opts.Serving.RequestRate, opts.Serving.TimeScale = 1e6, 1000
	const passSeconds = 1.0
	tst := checked()
	tst.Prefill = passPrefill{passSeconds: passSeconds, secondsPerToken: 1e-3}
	var measured, ideal []serving.Timing
	tst.ServingTimings = func(m, i []serving.Timing) { measured, ideal = m, i }
	r, err := runTesting(testJob(t), opts, tst)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Serving
	if s == nil {
		t.Fatal("no serving report with the serving clock on")
	}
	if s.ChunkedRequests == 0 || s.ChunkedForwardPasses < 2*s.ChunkedRequests ||
		s.ChunkTokens != 64 {
		t.Fatalf("serving report: %d requests chunked by %d tokens into %d forward passes, want some, 2 passes each at least",
			s.ChunkedRequests, s.ChunkTokens, s.ChunkedForwardPasses)
	}
	var summary strings.Builder
	r.WriteSummary(&summary)
	if !strings.Contains(summary.String(), "chunked prefill, MODELLED") {
		t.Errorf("the summary does not say what was chunked:\n%s", summary.String())
	}
	if len(measured) != len(ideal) {
		t.Fatalf("%d requests timed by the run, %d by the ideal", len(measured), len(ideal))
	}
	var chunked int
	for i, m := range measured {
		id := ideal[i]
		if m.Chunks > 1 {
			chunked++
		}
		computeNs := m.EndNs - m.ComputeStartNs
		if m.Chunks < 1 || m.Chunks != id.Chunks || computeNs < int64(m.Chunks)*1e9*passSeconds ||
			id.TTFTNs() > m.TTFTNs() {
			t.Fatalf(
				"request %d: run %+v (TTFT %d ns), ideal %+v (TTFT %d ns): want the same chunks, a pass's cost each, and the ideal no later",
				i, m, m.TTFTNs(), id, id.TTFTNs())
		}
		if s.MachinerySharePct == 0 && m.EndNs != id.EndNs {
			t.Fatalf("request %d: first token at %d ns on the run's clock, %d on the ideal's, with no step overrun",
				i, m.EndNs, id.EndNs)
		}
	}
	if len(measured) > 0 && chunked == 0 {
		t.Fatalf("none of CP rank 0's %d requests was chunked", len(measured))
	}
	t.Logf("%d requests of this group timed, %d chunked; the machinery added %g%% of the steps' time",
		len(measured), chunked, s.MachinerySharePct)
	checkNoLeakedSegments(t)
}
