package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// rankOneWrapper is a launcher script for mpirun: world rank 1 runs the binary with the environment in RANK1_ENV
// and from the folder RANK1_DIR (when set), as a per-node environment under Slurm would start it.
const rankOneWrapper = `#!/bin/sh
rank=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}
if [ "$rank" = 1 ]; then
	[ -n "$RANK1_DIR" ] && cd "$RANK1_DIR"
	exec env $RANK1_ENV "$@"
fi
exec "$@"
`

// runRankOneApart runs np 2 of the binary with args, rank 1 with env1 and in dir1 (when not ""), the others
// from dir, and returns how it ended and how long it took.
func runRankOneApart(t *testing.T, dir, dir1, env1 string, args ...string) (mpirunResult, time.Duration) {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "rank1.sh")
	if err := os.WriteFile(wrapper, []byte(rankOneWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), loaded(60*time.Second))
	defer cancel()
	full := append([]string{"-np", "2", "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", "-x", "RANK1_ENV", "-x", "RANK1_DIR", wrapper, binPath}, args...)
	cmd := exec.CommandContext(ctx, "mpirun", full...)
	cmd.Env = append(mpirunEnv(t), "RANK1_ENV="+env1, "RANK1_DIR="+dir1)
	cmd.Dir = dir
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := mpirunResult{stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("mpirun %v did not finish within five minutes:\n%s%s", args, res.stdout, res.stderr)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.exitCode = ee.ExitCode()
	}
	return res, time.Since(start)
}

// Every command that runs under mpirun (run, validate, topo, a bench under mpirun) refuses ranks that were not
// given the same job before it builds anything (a --cp that differs, before the topology that would spin): every
// rank names the setting with the value it holds and where it came from, and the job exits 2 within seconds.
// A trace with the same path and another content on rank 1 is found by its content.
func TestRanksGivenDifferentSettingsStopNamingThem(t *testing.T) {
	besideOthers(t)
	traces, traces1 := t.TempDir(), t.TempDir()
	excerpt, err := os.ReadFile(mooncakeExcerpt)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitAfter(string(excerpt), "\n")
	if err := os.WriteFile(filepath.Join(traces, "t.jsonl"), excerpt, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(traces1, "t.jsonl"), []byte(strings.Join(lines[:len(lines)/2], "")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		env1        string
		args        []string
		want, want1 string // rank 0's line and rank 1's
	}{
		{"CPHICACHE_CP=1", []string{"topo"}, `rank 0: the ranks were not given the same job: --cp is "0" here and differs`, `rank 1: the ranks were not given the same job: --cp is "1" here (from CPHICACHE_CP) and differs`},
		{"CPHICACHE_SEED=9", []string{"run", "--conversations", "4"}, `--seed is "1" here and differs`, `--seed is "9" here (from CPHICACHE_SEED)`},
		{"CPHICACHE_SEED=9", []string{"validate"}, `--seed is "1" here and differs`, `--seed is "9" here (from CPHICACHE_SEED)`},
		{"CPHICACHE_BENCH_STEP_ITERS=5", []string{"bench", "step", "--rounds", "1"}, `--iters is "2000" here and differs`, `--iters is "5" here (from CPHICACHE_BENCH_STEP_ITERS)`},
		{"", []string{"run", "--trace", "t.jsonl"}, `--trace's content is "`, `--trace's content is "`},
	} {
		t.Run(strings.Join(tc.args[:min(2, len(tc.args))], "_"), func(t *testing.T) {
			t.Parallel()
			dir1 := ""
			if tc.env1 == "" {
				dir1 = traces1
			}
			res, took := runRankOneApart(t, traces, dir1, tc.env1, tc.args...)
			if res.exitCode != 2 || took > spmd.SettingsTimeout { // the agreement's own watchdog would be later
				t.Errorf("exit %d after %v, want 2 before the agreement's watchdog:\n%s", res.exitCode, took, res.stderr)
			}
			for rank, want := range []string{tc.want, tc.want1} {
				line := lineWith(res.stderr, []string{"rank 0: ", "rank 1: "}[rank])
				if !strings.Contains(line, want) || !strings.Contains(line, "Give every rank the same command line") {
					t.Errorf("rank %d said %q, want %q in it:\n%s", rank, line, want, res.stderr)
				}
			}
		})
	}
}

// lineWith is the first line of text that contains s, or "".
func lineWith(text, s string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	return ""
}
