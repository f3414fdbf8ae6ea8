package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/report"
)

// geometryWorkload is a small synthetic workload at Poisson arrivals, replayed with copies of 8
// bytes a token a rank: its longest request has 1641 tokens.
var geometryWorkload = []string{"--conversations", "16", "--turns-max", "4",
	"--request-rate", "40", "--time-scale", "20", "--layers", "1", "--payloads", "1",
	"--token-bytes", "8"}

// TestRunWithTheClockRefusesAToyGeometry: with the serving clock on, run refuses (exit 2, naming
// the flag and the size that would do) an L1 that cannot hold the longest request and an L2
// smaller than the median prompt, as sweep refuses the first, instead of a summary of a toy's
// figures.
func TestRunWithTheClockRefusesAToyGeometry(t *testing.T) {
	besideOthers(t)
	clock := []string{"--gpu", "h100", "--prefill-model", "llama-3.1-8b"}
	for _, tc := range []struct {
		geometry []string
		want     []string
	}{
		{[]string{"--device-pages", "64", "--l2-slots", "2048"}, []string{"invalid --device-pages: 64 gives L1 64 pages",
			"longest request has 1641 tokens", "give L1 at least 102 pages (--device-pages 102, or --device-bytes 102MiB a rank)"}},
		{[]string{"--device-pages", "512", "--l2-slots", "16"}, []string{"invalid --l2-slots: 16 gives L2 16 slots = 256 tokens per CP group, less than the workload's median prompt",
			"give L2 at least", "--l2-bytes"}},
	} {
		args := append(append(append([]string{"run", "--quiet"}, geometryWorkload...), clock...),
			tc.geometry...)
		res := runMPI(t, 2, 60*time.Second, args...)
		if res.exitCode != 2 {
			t.Errorf("%v: exit %d, want 2\n%s%s", tc.geometry, res.exitCode, res.stdout, res.stderr)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(res.stderr, want) {
				t.Errorf("%v: the refusal lacks %q:\n%s", tc.geometry, want, res.stderr)
			}
		}
	}
}

// TestRunWithTheClockSizesItsGeometryFromTheModel: with the serving clock on and no L1 or L2 size
// given, run sizes them as the modelled deployment would (Llama-3.1-8B in bf16 on 2 H100s: 0.9 x
// 80 GB less 8 GB of weights a GPU, 64 GB of KV a GPU, 977K tokens over the group; L2 twice it),
// and says so in its summary and report, beside the per-rank copies the shared pool replaces.
func TestRunWithTheClockSizesItsGeometryFromTheModel(t *testing.T) {
	besideOthers(t)
	reportPath := filepath.Join(t.TempDir(), "r.json")
	res := runMPI(t, 2, 60*time.Second, append(append([]string{"run", "--quiet", "--report",
		reportPath}, geometryWorkload...), "--gpu", "h100", "--prefill-model", "llama-3.1-8b")...)
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	for _, want := range []string{"geometry sized from the model and the GPU (no L1 or L2 size given), MODELLED: L1 ",
		"= 0.9 x 80 GB of HBM", "llama-3.1-8b's bf16 weights over 2 GPUs", "L2 2 x L1",
		"per token of llama-3.1-8b",
		"beside per-rank copies (the design the shared L2 replaces), MODELLED at this run's hits and steps: TTFT p50",
		"their loads alone", "which a run cannot replay (sweep --l2-design both does)"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the summary lacks %q:\n%s", want, res.stdout)
		}
	}
	var r report.Report
	readJSON(t, reportPath, &r)
	c := r.Capacity
	if c.SizedBy == "" || c.DeviceTokens < 950_000 || c.DeviceTokens > 1_000_000 ||
		c.L2Slots != 2*c.DevicePages {
		t.Errorf("capacity %+v: want L1 about 977K tokens, L2 twice it, and how it was sized", c)
	}
	// Per-rank copies load a hit's whole KV into each of the 2 GPUs: never sooner.
	if s := r.Serving; s == nil || s.PerRankCopies == nil || s.PerRankCopies.TTFT.P99 < s.IdealTTFT.P99 {
		t.Errorf("serving %+v: want per-rank copies' TTFT, no sooner than the shared pool's ideal", s)
	}
}
