package cli

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/sweep"
)

// sameGeometryFlags are the flags TestRunAtCP8AndSweepOfAGroupOf8Agree gives run and sweep alike,
// with the prefill profile at profile: conversations with long shared prefixes at Poisson arrivals
// ten seconds apart, on a modelled group whose every forward pass takes 2 s or more (the profile),
// so that a run's real work on 8 ranks of 2 loaded cores (tens of milliseconds a step, a few
// hundred at worst) never outlasts a modelled step: the machinery then costs nothing, the run forms
// the steps of the sweep's virtual clock and loads back what it does. L1 is 140 MiB of
// DeepSeek-V3's KV a GPU (--prefill-model's bytes, 68.6 KiB a token): 261 pages of 64 tokens at
// cp 8, 32 at cp 1, where the longest request (12432 tokens) needs 194; the copies replay 8 bytes
// a token a rank.
func sameGeometryFlags(profile string) []string {
	return []string{
		"--conversations", "48", "--turns-max", "6", "--system-prompt-tokens", "4096",
		"--turn-tokens", "1024", "--page-tokens", "64", "--layers", "1", "--payloads", "1",
		"--token-bytes", "8", "--device-bytes", "140MiB", "--l2-slots", "2048",
		"--gpu", "h20", "--prefill-model", "deepseek-v3", "--prefill-profile", profile,
		"--request-rate", "0.1", "--step-tokens", "32768",
	}
}

// TestRunAtCP8AndSweepOfAGroupOf8Agree: one geometry for run and sweep. `run` at cp 8 under mpirun
// and `sweep --group-gpus 8` with the same flags give each GPU the same L1 (so the sweep is not
// refused: at cp 1 its L1 would be 8 times smaller than the longest request), form the serving
// clock's steps alike (not --batch-requests at a time, whose steps of 4 requests hit less), and so
// count the same hits, within 1%, and the same modelled TTFT p50, within 5%.
func TestRunAtCP8AndSweepOfAGroupOf8Agree(t *testing.T) {
	dir := t.TempDir()
	profile := filepath.Join(dir, "profile.txt")
	// new tokens, cached tokens, milliseconds: 2 s a forward pass, 6 s for 32768 new tokens
	if err := os.WriteFile(profile, []byte("1 0 2000\n32768 0 6000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	flags := sameGeometryFlags(profile)
	runJSON, sweepJSON := filepath.Join(dir, "run.json"), filepath.Join(dir, "sweep.json")
	res := runMPI(t, 8, 60*time.Second, append([]string{"run", "--quiet", "--sync-copies",
		"--time-scale", "1000", "--report", runJSON}, flags...)...)
	if res.exitCode != 0 {
		t.Fatalf("run: exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	singleton(t, append([]string{"sweep", "--group-gpus", "8", "--l2-design", "shared",
		"--json", sweepJSON}, flags...)...)
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
