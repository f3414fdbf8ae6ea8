package cli

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/sweep"
)

// sameGeometryFlags are the flags TestRunAtCP8AndSweepOfAGroupOf8Agree gives run and sweep alike:
// conversations with long shared prefixes, at Poisson arrivals, on a modelled group slow enough
// (DeepSeek-V3 in bf16 on H20s at an efficiency of 0.1: a step of cached requests costs 42 ms of
// weight reads alone) that a run's real work on 8 ranks of 2 loaded cores fits under every modelled
// step: the machinery then costs nothing, and the run forms the steps of the sweep's virtual clock.
// Its steps take up to 32768 prompt tokens, so they batch several requests (a step's requests do
// not hit each other's KV). L1 is 140 MiB of DeepSeek-V3's KV a GPU (68.6 KiB a token): 261 pages
// of 64 tokens at cp 8, 32 at cp 1, where the longest request (12432 tokens) needs 194; the copies
// replay 8 bytes a token a rank.
var sameGeometryFlags = []string{
	"--conversations", "48", "--turns-max", "6", "--system-prompt-tokens", "4096",
	"--turn-tokens", "1024", "--page-tokens", "64", "--layers", "1", "--payloads", "1",
	"--token-bytes", "8", "--device-bytes", "140MiB", "--l2-slots", "2048",
	"--gpu", "h20", "--prefill-model", "deepseek-v3", "--prefill-dtype", "bf16",
	"--prefill-efficiency", "0.1", "--request-rate", "0.5", "--step-tokens", "32768",
}

// TestRunAtCP8AndSweepOfAGroupOf8Agree: one geometry for run and sweep. `run` at cp 8 under mpirun
// and `sweep --group-gpus 8` with the same flags give each GPU the same L1 (so the sweep is not
// refused: at cp 1 its L1 would be 8 times smaller than the longest request), form the serving
// clock's steps alike (not --batch-requests at a time), and so count the same hits, within 1%, and
// the same modelled TTFT p50, within 5%.
func TestRunAtCP8AndSweepOfAGroupOf8Agree(t *testing.T) {
	dir := t.TempDir()
	runJSON, sweepJSON := filepath.Join(dir, "run.json"), filepath.Join(dir, "sweep.json")
	res := runMPI(t, 8, 60*time.Second, append([]string{"run", "--quiet", "--sync-copies",
		"--time-scale", "200", "--report", runJSON}, sameGeometryFlags...)...)
	if res.exitCode != 0 {
		t.Fatalf("run: exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	singleton(t, append([]string{"sweep", "--group-gpus", "8", "--json", sweepJSON},
		sameGeometryFlags...)...)
	var run report.Report
	var sw sweep.Result
	readJSON(t, runJSON, &run)
	readJSON(t, sweepJSON, &sw)
	if len(sw.Points) != 1 || run.Serving == nil || sw.Points[0].Serving == nil {
		t.Fatalf("sweep points %+v, run serving %+v: want one point, both with the clock", sw.Points,
			run.Serving)
	}
	p := sw.Points[0]
	if sw.DeviceTokens != run.Capacity.DeviceTokens || p.L2Slots != run.Capacity.L2Slots {
		t.Errorf("sweep L1 %d tokens, L2 %d slots; run at cp 8 L1 %d tokens, L2 %d slots: want one geometry",
			sw.DeviceTokens, p.L2Slots, run.Capacity.DeviceTokens, run.Capacity.L2Slots)
	}
	runHits, sweepHits := run.Hits.L1Tokens+run.Hits.L2Tokens, p.L1Tokens+p.L2HitTokens
	if run.Hits.L2Tokens == 0 || math.Abs(float64(sweepHits-runHits)) > 0.01*float64(runHits) {
		t.Errorf("hits: run %d (L1 %d, L2 %d), sweep %d (L1 %d, L2 %d): want within 1%%, with L2 hits",
			runHits, run.Hits.L1Tokens, run.Hits.L2Tokens, sweepHits, p.L1Tokens, p.L2HitTokens)
	}
	runP50, sweepP50 := run.Serving.TTFT.P50, p.Serving.TTFTP50
	if math.Abs(sweepP50-runP50) > 0.05*runP50 {
		t.Errorf("TTFT p50: run %.4g s (its machinery's cost %.2fx), sweep %.4g s: want within 5%%",
			runP50, run.Serving.MeasuredOverIdealP50, sweepP50)
	}
}
