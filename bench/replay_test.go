package bench

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/internal/errscope"
)

// TestSummarizeReplay: each configuration's row is the median of its runs, whatever their order,
// and the wall ratios divide the L3 rows' medians by the L2-only one's.
func TestSummarizeReplay(t *testing.T) {
	l3 := func(writeBytes, readBytes int64, p99Us float64) *report.L3Report {
		r := &report.L3Report{WriteBytes: writeBytes, ReadBytes: readBytes}
		r.PrefetchWaitUs.P50, r.PrefetchWaitUs.P99 = p99Us/10, p99Us
		return r
	}
	runs := []ReplayRun{
		{
			Config:      ReplayL2Only,
			WallSeconds: 12,
			ComputedPct: 70,
		}, {Config: ReplayL3Empty, WallSeconds: 36, L3: l3(5e6, 1e6, 9000)},
		{Config: ReplayL3Filled, WallSeconds: 7, L3: l3(1e6, 6e6, 3000), Wrong: 1},
		{
			Config:      ReplayL2Only,
			WallSeconds: 10,
			ComputedPct: 80,
		}, {Config: ReplayL3Empty, WallSeconds: 30, L3: l3(4e6, 2e6, 8000)},
		{Config: ReplayL3Filled, WallSeconds: 5, L3: l3(2e6, 5e6, 1000)},
		{
			Config:      ReplayL2Only,
			WallSeconds: 11,
			ComputedPct: 75,
		}, {Config: ReplayL3Empty, WallSeconds: 33, L3: l3(6e6, 3e6, 7000)},
		{Config: ReplayL3Filled, WallSeconds: 6, L3: l3(3e6, 4e6, 2000)},
	}
	res := SummarizeReplay(runs)
	if len(res.Rows) != 3 {
		t.Fatalf("%d rows, want 3", len(res.Rows))
	}
	want := map[string]ReplayRow{
		ReplayL2Only: {Runs: 3, WallSeconds: 11, WallOverL2Only: 1, ComputedPct: 75},
		ReplayL3Empty: {
			Runs:              3,
			WallSeconds:       33,
			WallOverL2Only:    3,
			L3WriteBytes:      5e6,
			L3ReadBytes:       2e6,
			PrefetchWaitP50Ms: 0.8,
			PrefetchWaitP99Ms: 8,
		},
		ReplayL3Filled: {
			Runs:              3,
			WallSeconds:       6,
			WallOverL2Only:    6.0 / 11,
			L3WriteBytes:      2e6,
			L3ReadBytes:       5e6,
			PrefetchWaitP50Ms: 0.2,
			PrefetchWaitP99Ms: 2,
			Wrong:             1,
		},
	}
	for _, r := range res.Rows {
		w := want[r.Config]
		w.Config, w.hasL3 = r.Config, r.Config != ReplayL2Only
		if math.Abs(r.WallOverL2Only-w.WallOverL2Only) > 1e-12 ||
			math.Abs(r.PrefetchWaitP50Ms-w.PrefetchWaitP50Ms) > 1e-12 {
			t.Errorf("%s: %+v, want %+v", r.Config, r, w)
		}
		r.WallOverL2Only, r.PrefetchWaitP50Ms, w.WallOverL2Only, w.PrefetchWaitP50Ms = 0, 0, 0, 0
		if r != w {
			t.Errorf("%s: %+v, want %+v", r.Config, r, w)
		}
	}
	if res.Ratios.EmptyOverL2Only != 3 || math.Abs(res.Ratios.FilledOverL2Only-6.0/11) > 1e-12 ||
		ReplayWrong(res) != 1 {
		t.Errorf("ratios %+v, wrong %d", res.Ratios, ReplayWrong(res))
	}
	if got := SummarizeReplay(runs[1:3]); got.Ratios.EmptyOverL2Only != 0 ||
		got.Ratios.FilledOverL2Only != 0 {
		t.Errorf("without an L2-only run the ratios are %+v, want 0 (not measured)", got.Ratios)
	}
}

// TestReplayConfigNamesTheFlag: an unusable setting is refused naming its flag; an L3 flag among
// every launch's flags would fail the L2-only launches, and the flags the benchmark sets itself
// cannot be given.
func TestReplayConfigNamesTheFlag(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "trace.jsonl")
	if err := os.WriteFile(trace, []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	good := ReplayConfig{
		Trace:       trace,
		NP:          2,
		Repeats:     1,
		Launcher:    []string{"mpirun"},
		Binary:      "cphicache",
		L3Parent:    t.TempDir(),
		OutDir:      t.TempDir(),
		TimeoutSec:  1,
		PlainRounds: 1,
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for flag, change := range map[string]func(*ReplayConfig){
		"trace":        func(c *ReplayConfig) { c.Trace = filepath.Join(t.TempDir(), "absent") },
		"np":           func(c *ReplayConfig) { c.NP = 0 },
		"repeats":      func(c *ReplayConfig) { c.Repeats = 0 },
		"plain-rounds": func(c *ReplayConfig) { c.PlainRounds = 0 },
		"l3-parent":    func(c *ReplayConfig) { c.L3Parent = trace },
		"run-args":     func(c *ReplayConfig) { c.RunArgs = []string{"--cp", "2", "--l3-bytes", "1GiB"} },
		"l3-run-args":  func(c *ReplayConfig) { c.L3RunArgs = []string{"--l3-dir=/tmp"} },
	} {
		c := good
		change(&c)
		var ce *errscope.ConfigError
		if err := c.Validate(); !errors.As(err, &ce) || ce.Flag != flag {
			t.Errorf("%s: %v, want a ConfigError naming --%s", flag, err, flag)
		}
	}
}

// TestSummarizeReplayOnTheServingClock: the TTFT columns are the medians of the runs' serving
// reports, divided by the L2-only row's for the targets; runs without the clock leave them 0 (not
// measured).
func TestSummarizeReplayOnTheServingClock(t *testing.T) {
	serving := func(p50, p99, overIdeal float64) *report.ServingReport {
		s := &report.ServingReport{MeasuredOverIdealP50: overIdeal, PromptTokensPerSecond: 1000}
		s.TTFT.P50, s.TTFT.P99 = p50, p99
		return s
	}
	runs := []ReplayRun{
		{
			Config:  ReplayL1Only,
			Serving: serving(9, 20, 1.2),
		}, {Config: ReplayL2Only, Serving: serving(4, 10, 1.1)},
		{
			Config:  ReplayL3Filled,
			Serving: serving(1, 3, 1.0),
		}, {Config: ReplayL2Only, Serving: serving(6, 12, 1.3)},
		{
			Config:  ReplayL3Filled,
			Serving: serving(2, 5, 1.05),
		}, {Config: ReplayL2Only, Serving: serving(5, 11, 1.2)},
		{Config: ReplayL3Filled, Serving: serving(3, 4, 1.1)}, {Config: ReplayL3Empty},
	}
	res := SummarizeReplay(runs)
	l2, filled := res.row(ReplayL2Only), res.row(ReplayL3Filled)
	if l2.TTFTP50Seconds != 5 || l2.TTFTP99Seconds != 11 || l2.MeasuredOverIdeal != 1.2 || l2.TTFTOverL2Only != 1 ||
		filled.TTFTP50Seconds != 2 || filled.TTFTP99Seconds != 4 ||
		filled.TTFTOverL2Only != 0.4 ||
		res.row(ReplayL1Only).TTFTOverL2Only != 1.8 {
		t.Fatalf("rows %+v", res.Rows)
	}
	if res.Ratios.TTFTFilledOverL2Only != 0.4 || res.Ratios.TTFTEmptyOverL2Only != 0 {
		t.Fatalf("ratios %+v: want 0.4, and 0 for the L3-empty row without the clock", res.Ratios)
	}
}

// TestReplayRatiosKeepTheirSignificantDigits: a filled L3's modelled TTFT a few thousandths of the
// L2-only one's prints as 0.003, where two decimals printed 0.00 (a ratio of nothing, beside its
// target).
func TestReplayRatiosKeepTheirSignificantDigits(t *testing.T) {
	serving := func(p50 float64) *report.ServingReport {
		s := &report.ServingReport{MeasuredOverIdealP50: 1.0, PromptTokensPerSecond: 1000}
		s.TTFT.P50, s.TTFT.P99 = p50, p50
		return s
	}
	res := SummarizeReplay([]ReplayRun{
		{Config: ReplayL1Only, Serving: serving(9)}, {Config: ReplayL2Only, Serving: serving(4)},
		{
			Config:  ReplayL3Empty,
			Serving: serving(4.4),
		}, {Config: ReplayL3Filled, Serving: serving(0.012)},
	})
	var b strings.Builder
	WriteReplayTable(&b, res)
	if !strings.Contains(b.String(), "L3-filled / L2-only: 0.003 (target") {
		t.Errorf("want the ratio 0.012 / 4 printed as 0.003:\n%s", b.String())
	}
}
