package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// Every bench flag can be set from the environment (under Slurm and mpirun -x), with a
// CPHICACHE_BENCH_ name that is unique, so that one exported variable never sets two benchmarks'
// files.
func TestBenchFlagsHaveUniqueEnvironmentVariables(t *testing.T) {
	seen := map[string]string{}
	for _, sub := range benchCommand().Subcommands {
		for _, f := range sub.Flags {
			envs := f.(interface{ GetEnvVars() []string }).GetEnvVars()
			name := sub.Name + " --" + f.Names()[0]
			if len(envs) != 1 || !strings.HasPrefix(envs[0], "CPHICACHE_BENCH_") {
				t.Errorf("%s: environment variables %v", name, envs)
				continue
			}
			if other, ok := seen[envs[0]]; ok {
				t.Errorf("%s and %s share %s", name, other, envs[0])
			}
			seen[envs[0]] = name
			if f.(cli.DocGenerationFlag).GetUsage() == "" {
				t.Errorf("%s has no usage", name)
			}
		}
	}
}

// bench step, tiny, under mpirun: it runs, validates, and prints every side with a finite, positive
// ratio. It never looks at a time.
func TestBenchStepSmoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.json")
	res := runMPI(
		t,
		2,
		60*time.Second,
		"bench",
		"step",
		"--iters",
		"50",
		"--warmup",
		"5",
		"--rounds",
		"3",
		"--json",
		path,
	)
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []struct {
			Side      string  `json:"side"`
			Calls     int     `json:"calls_per_step"`
			StepUs    float64 `json:"avg_latency_us_per_step"`
			OursRatio float64 `json:"ours_over_this"`
			Wrong     int64   `json:"wrong"`
		} `json:"rows"`
		Wrong int64 `json:"wrong"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	sides := map[string]int{}
	for _, r := range doc.Rows {
		sides[r.Side] = r.Calls
		if !(r.StepUs > 0) || math.IsInf(r.StepUs, 0) || !(r.OursRatio > 0) ||
			math.IsInf(r.OursRatio, 0) ||
			r.Wrong != 0 {
			t.Errorf("row %+v: want a finite positive latency and ratio and nothing wrong", r)
		}
	}
	if want := map[string]int{"ours": 1, "cgo-floor": 1, "C-fused": 1, "C-seed": 4}; len(
		sides,
	) != len(
		want,
	) ||
		doc.Wrong != 0 {
		t.Errorf("sides %v (want %v), wrong %d", sides, want, doc.Wrong)
	} else {
		for side, calls := range want {
			if sides[side] != calls {
				t.Errorf("%s makes %d calls per step, want %d", side, sides[side], calls)
			}
		}
	}
	if !strings.Contains(res.stdout, "# ours/C-seed ") {
		t.Errorf("no headline ratio:\n%s", res.stdout)
	}
}

// At one rank the step consensus is skipped, so there is nothing of ours to time: the benchmark
// says so.
func TestBenchStepRefusesOneRank(t *testing.T) {
	besideOthers(t)
	res := runMPI(t, 1, 60*time.Second, "bench", "step", "--iters", "5", "--rounds", "1")
	if res.exitCode == 0 || !strings.Contains(res.stdout+res.stderr, "at least 2 ranks") {
		t.Errorf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
}

// bench replay at tiny scale (2 ranks, a 12-request Mooncake trace of which --trace-limit keeps 10,
// 3 repeats): twelve real mpirun launches on the default serving clock, alternating L1-only,
// L2-only, L3-empty, L3-filled, each with a modelled TTFT; the filled launch of each repeat reads
// the directory its empty launch filled, a fresh one each repeat, all removed at the end; and every
// ratio printed is the one its runs give. It never looks at a time's value.
func TestBenchReplaySmoke(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	trace, l3Parent, jsonPath := filepath.Join(
		dir,
		"trace.jsonl",
	), filepath.Join(
		dir,
		"l3",
	), filepath.Join(
		dir,
		"replay.json",
	)
	var lines strings.Builder
	// a shared 3-block prefix, then a block of the request's own: the second job finds the prefix
	// in the L3
	for i := range 12 {
		fmt.Fprintf(
			&lines,
			`{"timestamp": %d, "input_length": 2048, "output_length": 4, "hash_ids": [0, 1, 2, %d]}`+"\n",
			10*i,
			100+i,
		)
	}
	if err := os.WriteFile(trace, []byte(lines.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(l3Parent, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), loaded(240*time.Second))
	defer cancel()
	cmd := exec.CommandContext(
		ctx,
		binPath,
		"bench",
		"replay",
		"--np",
		"2",
		"--trace",
		trace,
		"--l3-parent",
		l3Parent,
		"--out-dir",
		filepath.Join(dir, "out"),
		"--json",
		jsonPath,
		"--plain-rounds",
		"3",
		"--l3-run-args",
		"--l3-prefetch-threshold 64",
		"--",
		"--cp",
		"2",
		"--trace-limit",
		"10",
		"--page-tokens",
		"64",
		"--token-bytes",
		"8",
		"--layers",
		"1",
	)
	cmd.Env = mpirunEnv(t) // its launches carry this test's job id
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench replay: %v\n%s", err, out)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Rows []struct {
			Config   string  `json:"config"`
			Runs     int     `json:"runs"`
			TTFTP50  float64 `json:"ttft_p50_s"`
			Wall     float64 `json:"wall_seconds"`
			OverL2   float64 `json:"wall_over_l2_only"`
			P99Ms    float64 `json:"prefetch_wait_p99_ms"`
			ReadByte float64 `json:"l3_read_bytes"`
			Wrong    int64   `json:"wrong"`
		} `json:"rows"`
		Ratios   map[string]float64 `json:"ratios"`
		Prefetch struct {
			Blocks      int     `json:"blocks"`
			PlainReadMs float64 `json:"plain_read_ms"`
		} `json:"prefetch_plain_read"`
		Runs []struct {
			Config string  `json:"config"`
			Repeat int     `json:"repeat"`
			L3Dir  string  `json:"l3_dir"`
			Wall   float64 `json:"wall_seconds"`
		} `json:"runs"`
	}
	var top struct {
		Result json.RawMessage `json:"rows"` // the whole result, as bench e2e's
		Wrong  int64           `json:"wrong"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(top.Result, &doc); err != nil {
		t.Fatal(err)
	}
	configs := []string{"L1-only", "L2-only", "L3-empty", "L3-filled"}
	if len(doc.Runs) != 12 || len(doc.Rows) != 4 || top.Wrong != 0 {
		t.Fatalf(
			"%d runs, %d rows, %d wrong; want 12 runs and 4 rows, nothing wrong\n%s",
			len(doc.Runs),
			len(doc.Rows),
			top.Wrong,
			out,
		)
	}
	walls := map[string][]float64{}
	for i, r := range doc.Runs {
		if r.Config != configs[i%4] || r.Repeat != i/4 {
			t.Errorf(
				"launch %d is %s of repeat %d: want the configurations alternating, a repeat at a time",
				i,
				r.Config,
				r.Repeat,
			)
		}
		switch {
		case (r.Config == "L1-only" || r.Config == "L2-only") && r.L3Dir != "":
			t.Errorf("launch %d: an L2-only launch with an L3 directory %s", i, r.L3Dir)
		case r.Config == "L3-filled" && r.L3Dir != doc.Runs[i-1].L3Dir:
			t.Errorf(
				"launch %d: the filled launch reads %s, not the directory the empty one filled (%s)",
				i,
				r.L3Dir,
				doc.Runs[i-1].L3Dir,
			)
		case r.Config == "L3-empty" && i >= 4 && r.L3Dir == doc.Runs[i-4].L3Dir:
			t.Errorf("launch %d: repeat %d's empty launch reuses %s", i, r.Repeat, r.L3Dir)
		}
		walls[r.Config] = append(walls[r.Config], r.Wall)
	}
	if left, _ := os.ReadDir(l3Parent); len(left) != 0 {
		t.Errorf("the L3 directories were left behind: %v", left)
	}
	med := func(v []float64) float64 { s := slices.Clone(v); slices.Sort(s); return s[len(s)/2] }
	base := med(walls["L2-only"])
	for i, r := range doc.Rows {
		if r.Config != configs[i] || r.Runs != 3 || r.Wall != med(walls[r.Config]) ||
			math.Abs(r.OverL2-r.Wall/base) > 1e-9 ||
			!(r.TTFTP50 > 0) {
			t.Errorf(
				"row %+v: want %s, 3 runs, the median wall of its runs (%v), its ratio to L2-only's median (%g) and a modelled TTFT",
				r,
				configs[i],
				walls[r.Config],
				base,
			)
		}
	}
	filled := doc.Rows[3]
	if !(filled.ReadByte > 0) || doc.Prefetch.Blocks < 1 || !(doc.Prefetch.PlainReadMs > 0) {
		t.Fatalf(
			"the filled launches read %g bytes from the L3, plain reference %+v: want both measured\n%s",
			filled.ReadByte,
			doc.Prefetch,
			out,
		)
	}
	for name, want := range map[string]float64{
		"l3_empty_over_l2_only": doc.Rows[2].Wall / base, "l3_filled_over_l2_only": filled.Wall / base,
		"ttft_l3_filled_over_l2_only":            filled.TTFTP50 / doc.Rows[1].TTFTP50,
		"l3_filled_prefetch_p99_over_plain_read": filled.P99Ms / doc.Prefetch.PlainReadMs,
	} {
		if got, ok := doc.Ratios[name]; !ok || math.Abs(got-want) > 1e-9*want {
			t.Errorf("ratio %s: %g, want %g from the runs", name, got, want)
		}
	}
	// On the serving clock its targets are the ones printed (the walls' apply to a replay without
	// it).
	for _, line := range []string{"# MODELLED TTFT p50, L3-filled / L2-only: ", "# MODELLED TTFT p50, L3-empty / L2-only: ", "# L3-filled machinery cost on the modelled clock, TTFT p50 over ideal: "} {
		if !strings.Contains(string(out), line) {
			t.Errorf("no line %q in\n%s", line, out)
		}
	}
}
