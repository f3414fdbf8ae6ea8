package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/sweep"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The sweep and model tests run the binary as an MPI singleton, without mpirun, as a user runs
// sweep.

// singleton runs the binary without mpirun and fails the test on a non-zero exit.
func singleton(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binPath, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	timer := time.AfterFunc(120*time.Second, func() { cmd.Process.Kill() })
	defer timer.Stop()
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

func readJSON(t *testing.T, path string, into any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// sweepWorkload is a small synthetic workload; sweepL1 an L1 small enough that the L2's size
// matters.
var sweepWorkload = []string{"--conversations", "24", "--turns-max", "5"}
var sweepL1 = []string{"--device-pages", "128"}

// TestSweepPointEqualsRun: a sweep point counts the same hits as `run --sync-copies` at that size,
// in slots and in a model's bytes (the sizing path: --model, --l2-bytes, --device-bytes,
// --copy-token-bytes). The run is one process, cp 1: the sweep models a group of one GPU
// (TestRunAtCP8AndSweepOfAGroupOf8Agree compares a group of 8).
func TestSweepPointEqualsRun(t *testing.T) {
	dir := t.TempDir()
	// 256 MiB of Llama-3.1-8B at 128 KiB per token is 2048 tokens, 128 pages: sweepL1's.
	model := []string{
		"--model",
		"llama-3.1-8b",
		"--copy-token-bytes",
		"8",
		"--device-bytes",
		"256MiB",
	}
	for _, tc := range []struct {
		name        string
		sweep, runs []string
		point       int
	}{
		{"slots", append([]string{"--l2-slots", "64,256"}, sweepL1...), append([]string{"--l2-slots", "256"}, sweepL1...), 1},
		{"model bytes", append([]string{"--l2-bytes", "512MiB,2GiB"}, model...), append([]string{"--l2-bytes", "512MiB"}, model...), 0},
	} {
		sweepJSON, runJSON := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "run.json")
		singleton(
			t,
			append(
				append([]string{"sweep", "--group-gpus", "1", "--json", sweepJSON}, sweepWorkload...),
				tc.sweep...)...)
		singleton(
			t,
			append(
				append(
					[]string{"run", "--quiet", "--sync-copies", "--report", runJSON},
					sweepWorkload...),
				tc.runs...)...)
		var sweep sweep.Result
		var run report.Report
		readJSON(t, sweepJSON, &sweep)
		readJSON(t, runJSON, &run)
		p := sweep.Points[tc.point]
		got := [5]int64{p.L1Tokens, p.L2HitTokens, p.MissTokens, p.IdealTokens, int64(p.L2Slots)}
		want := [5]int64{
			run.Hits.L1Tokens,
			run.Hits.L2Tokens,
			run.Hits.MissTokens,
			run.Hits.IdealTokens,
			int64(run.Capacity.L2Slots),
		}
		if got != want || run.Hits.L2Tokens == 0 {
			t.Errorf(
				"%s: sweep point (L1, L2, miss, ideal, slots) %v, run %v (want equal, with L2 hits)",
				tc.name,
				got,
				want,
			)
		}
	}
}

// TestSweepWritesJSONAndPNG: one point per size, in order, with capacities in slots, tokens and
// bytes, rates that grow with the size and stay under the ideal, and a PNG that decodes.
func TestSweepWritesJSONAndPNG(t *testing.T) {
	dir := t.TempDir()
	sweepJSON, plot := filepath.Join(dir, "sweep.json"), filepath.Join(dir, "sweep.png")
	out := singleton(
		t,
		append(
			[]string{"sweep", "--l2-slots", "16,128,1024", "--json", sweepJSON, "--plot", plot},
			append(sweepWorkload, sweepL1...)...)...)
	if n := strings.Count(out, "  L2 "); n != 3 {
		t.Errorf("%d point lines, want 3:\n%s", n, out)
	}
	// Without --model or --token-bytes the bytes are the default model's, 2 KiB a token at any CP
	// size: nothing to say of cp 1 (a --token-bytes given is per rank, and the sweep then says its
	// bytes are at cp 1).
	if strings.Contains(out, "# bytes are at cp 1") {
		t.Errorf("with the default model the sweep says its bytes are at cp 1:\n%s", out)
	}
	var sweep sweep.Result
	readJSON(t, sweepJSON, &sweep)
	if len(sweep.Points) != 3 || sweep.PageTokens != 16 || sweep.TokenBytes != 2048 {
		t.Fatalf("%+v", sweep)
	}
	for i, slots := range []int{16, 128, 1024} {
		p := sweep.Points[i]
		if p.L2Slots != slots || p.L2Tokens != int64(slots*16) ||
			p.L2Bytes != p.L2Tokens*sweep.TokenBytes ||
			p.HitRate <= 0 ||
			p.HitRate > p.IdealRate ||
			(i > 0 && p.HitRate <= sweep.Points[i-1].HitRate) {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	f, err := os.Open(plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil || img.Bounds().Dx() < 400 {
		t.Fatalf("%s: %v (size %v)", plot, err, img)
	}
	// Nothing is drawn in the image's last columns: the legend (and its line samples) fit inside.
	b := img.Bounds()
	for x := b.Max.X - 3; x < b.Max.X; x++ {
		for y := b.Min.Y; y < b.Max.Y; y++ {
			if r, g, bl, _ := img.At(x, y).RGBA(); r < 0xf000 || g < 0xf000 || bl < 0xf000 {
				t.Fatalf(
					"%s: pixel (%d, %d) at the right edge is drawn: the legend is clipped",
					plot,
					x,
					y,
				)
			}
		}
	}
}

// TestModelCapacityInSummary: run states each tier in tokens and bytes, and says plainly that
// copies are scaled: 64 GiB of Llama-3.1-70B at 320 KiB per token is 13107 slots of 16 tokens.
func TestModelCapacityInSummary(t *testing.T) {
	reportPath := filepath.Join(t.TempDir(), "r.json")
	out := singleton(
		t,
		append(
			[]string{
				"run",
				"--quiet",
				"--model",
				"llama-3.1-70b",
				"--l2-bytes",
				"64GiB",
				"--device-bytes",
				"1GiB",
				"--copy-token-bytes",
				"8",
				"--report",
				reportPath,
			},
			sweepWorkload...)...)
	for _, want := range []string{"L2 13107 slots = 209712 tokens = 64 GiB per CP group, 64 GiB per node", "L1 204 pages = 3264 tokens = 1020 MiB per rank (a GPU)",
		"KV 320 KiB per token of llama-3.1-70b", "copies SCALED DOWN: 1.25 KiB copied per token instead of 320 KiB"} {
		if !strings.Contains(out, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	var r report.Report
	readJSON(t, reportPath, &r)
	if c := r.Capacity; c.L2Tokens != 209712 || c.TokenBytes != 320<<10 || !c.Scaled ||
		c.L2SlabBytes != 209712*1280 {
		t.Errorf("report capacity %+v", c)
	}
}

// TestModelAndSizeFlagsNameTheFlag: each bad sizing flag fails in Before, naming itself.
func TestModelAndSizeFlagsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"run", "--model", "gpt-5"}, "model"},
		{[]string{"run", "--model", "llama-3.1-70b", "--token-bytes", "64"}, "token-bytes"},
		{[]string{"run", "--l2-bytes", "12XB"}, "l2-bytes"},
		{[]string{"run", "--l2-bytes", "1GiB", "--l2-slots", "64"}, "l2-bytes"},
		{[]string{"run", "--l2-slots", "64,128"}, "l2-slots"},
		{[]string{"run", "--device-bytes", "-4GiB"}, "device-bytes"},
		{[]string{"validate", "--copy-token-bytes", "12"}, "copy-token-bytes"},
		{[]string{"sweep"}, "l2-bytes"},
		{[]string{"sweep", "--l2-slots", "64,lots"}, "l2-slots"},
		{[]string{"sweep", "--l2-bytes", "64GiB,,1TiB"}, "l2-bytes"},
		{[]string{"sweep", "--l2-slots", "64,0"}, "l2-slots"},
	} {
		err := newApp().Run(append([]string{"cphicache"}, tc.args...))
		var ce *errscope.ConfigError
		if !errors.As(err, &ce) || ce.Flag != tc.flag {
			t.Errorf("%v: error %v, want an invalid --%s", tc.args, err, tc.flag)
		}
	}
}

// TestModelSetsTheOptions: --model and the byte sizes reach config.Options as given; Size turns
// them into the geometry once the CP size is known.
func TestModelSetsTheOptions(t *testing.T) {
	got := captureRun(
		t,
		"--model",
		"deepseek-v3",
		"--l2-bytes",
		"512GiB",
		"--device-bytes",
		"40GiB",
		"--copy-token-bytes",
		"16",
		"--sync-copies",
	)
	if got.Model != "deepseek-v3" || got.L2Bytes != 512<<30 || got.DeviceBytes != 40<<30 ||
		got.CopyTokenBytes != 16 ||
		!got.SyncCopies {
		t.Fatalf("%+v", got)
	}
	sized, err := got.Size(8, 8, 1)
	if err != nil || sized.Layers != 61 || sized.PayloadsPerLayer != 1 || sized.TokenBytes != 16 ||
		sized.L2Slots != int((512<<30)/(16*61*1152)) {
		t.Errorf("sized at cp 8: %+v %v", sized, err)
	}
}

// TestSweepRefusesAnL1ShorterThanTheLongestRequest: a request's pages past L1 are never cached at
// any L2 size, so the sweep refuses to start, naming the L1 given and the longest request, each in
// pages and tokens.
func TestSweepRefusesAnL1ShorterThanTheLongestRequest(t *testing.T) {
	out, err := exec.Command(binPath, "sweep", "--l2-slots", "64,128", "--device-pages", "100").
		CombinedOutput()
	for _, want := range []string{"invalid --device-pages: 100 gives L1 100 pages = 1600 tokens per rank", "longest request has 3033 tokens = 189 pages of 16"} {
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("exit %v; want the refusal to say %q:\n%s", err, want, out)
		}
	}
	if strings.Contains(string(out), "  L2 ") {
		t.Errorf("the sweep ran a point before refusing:\n%s", out)
	}
}

// TestSweepLineSaysUncachedPages: a point with pages L1 could not hold says so on its line.
func TestSweepLineSaysUncachedPages(t *testing.T) {
	var b strings.Builder
	writeSweepPoint(
		&b,
		"",
		sweep.Point{
			L2Slots:               64,
			UncachedPages:         49231,
			UncachedPct:           92.9,
			UncachedOversizePages: 49000,
		},
	)
	if want := "49231 pages (92.9%) not cached: a request needs more L1 than --device-pages gives"; !strings.Contains(
		b.String(),
		want,
	) {
		t.Errorf("the sweep line does not say %q:\n%s", want, b.String())
	}
}
