package bench

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// These tests pin the benchmarks' validation and bookkeeping; they never look at a time. The MPI
// side runs in `make bench-smoke` under mpirun.

func TestCountWrongMinAcceptsTheMinAndRejectsOneRanksBuffer(t *testing.T) {
	const ranks, count = 4, 257
	buf := make([]uint64, count)
	for i := range buf {
		buf[i] = minInput(0, i)
		for r := 1; r < ranks; r++ {
			buf[i] = min(buf[i], minInput(r, i))
		}
	}
	if wrong := countWrongMin(buf, ranks); wrong != 0 {
		t.Fatalf("the true MIN counted %d wrong elements", wrong)
	}
	// A reduction that returned one rank's own data (or skipped the others) must be caught on most
	// elements: the rank holding the MIN changes from element to element.
	for r := range ranks {
		fillMinInput(buf, r)
		if wrong := countWrongMin(buf, ranks); wrong < count/2 {
			t.Errorf("rank %d's own buffer: only %d of %d elements wrong", r, wrong, count)
		}
	}
	fillMinInput(buf, 0)
	if countWrongMin(buf, 1) != 0 {
		t.Error("one rank: its own value is the MIN")
	}
}

func TestAllreduceConfigValidate(t *testing.T) {
	good := AllreduceConfig{
		MinCount:    1,
		MaxCount:    1 << 16,
		CountFactor: 4,
		Iters:       10,
		ItersLarge:  1,
		Warmup:      0,
		Rounds:      1,
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*AllreduceConfig){
		"min not a power of two": func(c *AllreduceConfig) { c.MinCount = 3 },
		"max below min":          func(c *AllreduceConfig) { c.MaxCount = 0 },
		"factor 3":               func(c *AllreduceConfig) { c.CountFactor = 3 },
		"no rounds":              func(c *AllreduceConfig) { c.Rounds = 0 },
	} {
		c := good
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func smallCopyConfig() CopyConfig {
	return CopyConfig{
		PartBytes:  []int64{4 << 10, 64 << 10},
		TotalBytes: 1 << 20,
		Layers:     2,
		Payloads:   2,
		CPSize:     2,
		Workers:    2,
		Iters:      1,
		Rounds:     1,
	}
}

func TestRunCopyCoversBothLayoutsAndDirectionsWithNothingWrong(t *testing.T) {
	rows, err := RunCopy(smallCopyConfig())
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2*2*2 {
		t.Fatalf("%d rows, want 8 (2 layouts x 2 part sizes x 2 directions)", len(rows))
	}
	seen := map[string]bool{}
	for _, r := range rows {
		seen[r.Layout+"/"+r.Direction] = true
		if r.WrongParts != 0 || r.TotalBytes != 1<<20 || r.OursGBps <= 0 || r.MemcpyGBps <= 0 {
			t.Errorf("row %+v", r)
		}
	}
	if len(seen) != 4 {
		t.Errorf("cases %v, want layer_first and page_first in D2H and H2D", seen)
	}
	if CopyWrong(rows) != 0 {
		t.Error("CopyWrong of clean rows is not 0")
	}
}

// A copy that lands in the wrong place must show in #wrong: two parts copied onto one slot leave
// the other slot's bytes unwritten.
func TestCopyVerifyCatchesMisplacedParts(t *testing.T) {
	cfg := smallCopyConfig()
	for _, layout := range []pool.Layout{pool.LayerFirst, pool.PageFirst} {
		for _, gather := range []bool{true, false} {
			c, err := newCopyCase(cfg, layout, 4<<10)
			if err != nil {
				t.Fatal(err)
			}
			expected := make([][]kernels.Span, len(c.spans))
			for i := range c.spans {
				expected[i] = slices.Clone(c.spans[i])
			}
			if wrong, err := c.verify(gather, expected); err != nil || wrong != 0 {
				t.Fatalf(
					"%s gather=%v: correct spans gave %d wrong (%v)",
					layout,
					gather,
					wrong,
					err,
				)
			}
			c.spans[1][3].SlabOffsetBytes = c.spans[1][2].SlabOffsetBytes
			c.spans[1][3].DeviceOffsetBytes = c.spans[1][2].DeviceOffsetBytes
			if wrong, err := c.verify(gather, expected); err != nil || wrong == 0 {
				t.Errorf("%s gather=%v: a misplaced part went unseen (%v)", layout, gather, err)
			}
			c.engine.Close()
		}
	}
}

// The spans must be hicache's: the slab side from pool.Geometry.PartOffset of CP rank 0, the device
// side [layer][payload][page].
func TestCopySpansFollowTheGeometry(t *testing.T) {
	cfg := smallCopyConfig()
	c, err := newCopyCase(cfg, pool.PageFirst, 4<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer c.engine.Close()
	s := c.spans[1][2*cfg.Payloads+1] // layer 1, page 2, payload 1
	if want := c.geometry.PartOffset(0, 2, 0, 1, 1); s.SlabOffsetBytes != want {
		t.Errorf("slab offset %d, want %d", s.SlabOffsetBytes, want)
	}
	if want := int64((1*cfg.Payloads+1)*c.pages+2) * (4 << 10); s.DeviceOffsetBytes != want {
		t.Errorf("device offset %d, want %d", s.DeviceOffsetBytes, want)
	}
}

func TestRunReserveIsCleanAndRelativeToTheSmallestPool(t *testing.T) {
	rows, err := RunReserve(
		ReserveConfig{SlotsLog2: []int{8, 12}, Pages: []int{1, 16}, MinSeconds: 0.005},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4 {
		t.Fatalf("%d rows", len(rows))
	}
	for _, r := range rows {
		if r.Wrong != 0 || r.Ops < reserveBatch || r.OpsPerSecond <= 0 {
			t.Errorf("row %+v", r)
		}
		if r.SlotsLog2 == 8 && r.VsSmallest != 1 {
			t.Errorf("the smallest pool's ratio is %g, want 1", r.VsSmallest)
		}
	}
	if err := (ReserveConfig{SlotsLog2: []int{4}, Pages: []int{16}, MinSeconds: 1}).Validate(); err == nil {
		t.Error("an object larger than the free half of the pool was accepted")
	}
}

func fakeRun(
	t *testing.T,
	dir string,
	np int,
	every int64,
	wall float64,
	divergences int64,
) E2ERun {
	t.Helper()
	r := &report.Report{Ranks: np, CP: np, DP: 1, Steps: 100, Requests: 400}
	r.WallSeconds = wall
	r.WritingCheckUs.P50, r.WritingCheckUs.P99 = wall, 10*wall
	r.Placement.Divergences = divergences
	r.Hits.L1Tokens, r.Hits.L2Tokens, r.Hits.MissTokens = 500, 300, 200
	r.Groups = []report.GroupReport{{Group: 0, Size: np, Hosts: slices.Repeat([]string{"h"}, np)}}
	path := filepath.Join(dir, "r.json")
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	read, err := ReadReport(path)
	if err != nil {
		t.Fatal(err)
	}
	return E2ERun{
		NP:                 np,
		AssertEvery:        every,
		report:             read,
		StepsPerSec:        float64(read.Steps) / read.WallSeconds,
		PromptTokensPerSec: float64(promptTokens(read)) / read.WallSeconds,
	}
}

func TestSummarizeE2EMediansOverheadAndWrong(t *testing.T) {
	dir := t.TempDir()
	runs := []E2ERun{
		fakeRun(t, dir, 2, 8, 1.0, 0), fakeRun(t, dir, 2, 0, 0.8, 0),
		fakeRun(
			t,
			dir,
			2,
			8,
			5.0,
			0,
		), fakeRun(t, dir, 2, 0, 1.0, 0), // outliers: the medians ignore them
		fakeRun(t, dir, 2, 8, 1.0, 1), fakeRun(t, dir, 2, 0, 0.8, 0),
		fakeRun(t, dir, 4, 8, 2.0, 0),
	}
	rows := SummarizeE2E(runs)
	if len(rows) != 3 {
		t.Fatalf("%d rows, want 3", len(rows))
	}
	on, off := rows[0], rows[1]
	if on.AssertEvery != 8 || off.AssertEvery != 0 || on.Runs != 3 {
		t.Fatalf("rows out of order: %+v", rows)
	}
	if on.StepsPerSecond != 100 || off.StepsPerSecond != 125 || on.WritingCheckP99Us != 10 {
		t.Errorf(
			"medians: on %g, off %g steps/s, p99 %g",
			on.StepsPerSecond,
			off.StepsPerSecond,
			on.WritingCheckP99Us,
		)
	}
	if on.PromptTokens != 1000 || on.PromptTokensPerSecond != 1000 ||
		off.PromptTokensPerSecond != 1250 {
		t.Errorf(
			"prompt tokens %d, at %g and %g tokens/s; want 1000, 1000 and 1250",
			on.PromptTokens,
			on.PromptTokensPerSecond,
			off.PromptTokensPerSecond,
		)
	}
	if math.Abs(on.AssertOverheadPct-20) > 1e-9 || off.AssertOverheadPct != 0 {
		t.Errorf(
			"overhead %g%% and %g%%, want 20 and 0",
			on.AssertOverheadPct,
			off.AssertOverheadPct,
		)
	}
	if rows[2].AssertOverheadPct != 0 {
		t.Error("no baseline at np 4, yet an overhead was computed")
	}
	if on.Wrong != 1 || E2EWrong(rows) != 1 {
		t.Errorf("wrong %d / %d, want the one divergence", on.Wrong, E2EWrong(rows))
	}
	if ranks := E2ERanks(runs); len(ranks) != 4 || ranks[3].CPRank != 3 || ranks[3].NodeRank != -1 {
		t.Errorf("rank map %+v", ranks)
	}
}

func TestReadReportRejectsWhatIsNotARunReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.json")
	os.WriteFile(path, []byte(`{"steps": 3}`), 0o644)
	if _, err := ReadReport(path); err == nil {
		t.Error("a report without wall time was accepted")
	}
}

func TestTableColumnsLineUp(t *testing.T) {
	var b bytes.Buffer
	WriteCopyTable(
		&b,
		[]CopyRow{
			{
				Layout:     "layer_first",
				Direction:  "D2H",
				PartBytes:  4096,
				TotalBytes: 1 << 25,
				Spans:      8192,
				Iters:      30,
				OursGBps:   5.5,
				MemcpyGBps: 5.6,
				Ratio:      0.98,
			},
		},
	)
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d lines:\n%s", len(lines), b.String())
	}
	for _, l := range lines {
		if len(l) != len(lines[0]) {
			t.Errorf(
				"line of %d characters, the header has %d:\n%s",
				len(l),
				len(lines[0]),
				b.String(),
			)
		}
	}
	if !strings.HasSuffix(lines[0], "#wrong") || !strings.HasSuffix(lines[2], " 0") {
		t.Errorf("#wrong is not the last column:\n%s", b.String())
	}
}

func TestHeaderHasVersionConfigurationAndRanks(t *testing.T) {
	m := NewMeta("copy", "v1.2.3-4-gabc")
	m.Set("workers", 2)
	m.SingleRank()
	var b bytes.Buffer
	m.WriteHeader(&b)
	for _, want := range []string{"# cphicache bench copy", "version v1.2.3-4-gabc", "workers", "# ranks: 1", "rank   0  host"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("header lacks %q:\n%s", want, b.String())
		}
	}
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			t.Errorf("header line without '#': %q", l)
		}
	}
	if CheckWrong("copy", 0) != nil || CheckWrong("copy", 2) == nil {
		t.Error("CheckWrong")
	}
}

func TestPlotsWritePNGs(t *testing.T) {
	dir := t.TempDir()
	copyRows := []CopyRow{
		{Layout: "layer_first", Direction: "D2H", PartBytes: 4096, OursGBps: 5, MemcpyGBps: 6},
		{Layout: "layer_first", Direction: "D2H", PartBytes: 65536, OursGBps: 5.5, MemcpyGBps: 6},
	}
	arRows := []AllreduceRow{
		{Bytes: 8, OurUs: 1.4, FloorUs: 1.1, RefUs: 0.9},
		{Bytes: 32, OurUs: 1.5, FloorUs: 1.2, RefUs: 1.0},
	}
	for name, draw := range map[string]func(string) error{
		"copy.png":      func(p string) error { return PlotCopy(copyRows, p, "t") },
		"allreduce.png": func(p string) error { return PlotAllreduce(arRows, p, "t") },
	} {
		path := filepath.Join(dir, name)
		if err := draw(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(b, []byte("\x89PNG")) {
			t.Errorf("%s is not a PNG (%v)", name, err)
		}
	}
}
