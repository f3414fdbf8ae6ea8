package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"
)

// Every bench flag can be set from the environment (under Slurm and mpirun -x), with a CPHICACHE_BENCH_ name
// that is unique, so that one exported variable never sets two benchmarks' files.
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

// bench step, tiny, under mpirun: it runs, validates, and prints every side with a finite, positive ratio. It
// never looks at a time.
func TestBenchStepSmoke(t *testing.T) {
	path := filepath.Join(t.TempDir(), "step.json")
	res := runMPI(t, 2, 60*time.Second, "bench", "step", "--iters", "50", "--warmup", "5", "--rounds", "3", "--json", path)
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
		if !(r.StepUs > 0) || math.IsInf(r.StepUs, 0) || !(r.OursRatio > 0) || math.IsInf(r.OursRatio, 0) || r.Wrong != 0 {
			t.Errorf("row %+v: want a finite positive latency and ratio and nothing wrong", r)
		}
	}
	if want := map[string]int{"ours": 1, "cgo-floor": 1, "C-fused": 1, "C-seed": 4}; len(sides) != len(want) || doc.Wrong != 0 {
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

// At one rank the step consensus is skipped, so there is nothing of ours to time: the benchmark says so.
func TestBenchStepRefusesOneRank(t *testing.T) {
	res := runMPI(t, 1, 60*time.Second, "bench", "step", "--iters", "5", "--rounds", "1")
	if res.exitCode == 0 || !strings.Contains(res.stdout+res.stderr, "at least 2 ranks") {
		t.Errorf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
}
