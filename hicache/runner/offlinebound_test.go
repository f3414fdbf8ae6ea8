package runner

import (
	"strings"
	"testing"
)

// TestOfflineBoundOfARun: a one-rank run asked for the OFFLINE bound (sweep's
// config.Options.OfflineBound) reports it at L1's pages plus the L2's slots, over the prompt tokens
// it served: at least its own L1 + L2 hits (no policy passes it) and at most the ideal, the
// flushes cut alike, and without the serving clock no TTFT. A job of more ranks refuses it before
// any collective, on every rank alike.
func TestOfflineBoundOfARun(t *testing.T) {
	opts := smallOptions()
	opts.SyncCopies, opts.OfflineBound = true, true
	r, err := runTesting(testJob(t), opts, checked())
	if n := testWorld.Size(); n > 1 {
		if err == nil || !strings.Contains(err.Error(), "a run of one rank") || r != nil {
			t.Fatalf("%d ranks: report %v, error %v; want the bound refused", n, r, err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	b, hits := r.OfflineBound, r.Hits.L1Tokens+r.Hits.L2Tokens
	if b == nil || b.CapacityPages != r.Capacity.DevicePages+r.Capacity.L2Slots ||
		b.PromptTokens != hits+r.Hits.MissTokens || b.Serving != nil {
		t.Fatalf("bound %+v, capacity %+v, hits %+v", b, r.Capacity, r.Hits)
	}
	if b.HitTokens < hits || b.HitTokens > r.Hits.IdealTokens || r.Flushes == 0 {
		t.Errorf("bound %d hit tokens; the run's %d, the ideal %d, %d flushes: want run <= bound "+
			"<= ideal over a run that flushes", b.HitTokens, hits, r.Hits.IdealTokens, r.Flushes)
	}
	t.Logf("run %d hit tokens, OFFLINE bound %d at %d pages, ideal %d", hits, b.HitTokens,
		b.CapacityPages, r.Hits.IdealTokens)
	checkNoLeakedSegments(t)
}
