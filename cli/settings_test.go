package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// rankOneWrapper is a launcher script for mpirun: world rank 1 runs the binary with the environment
// in RANK1_ENV and from the folder RANK1_DIR (when set), as a per-node environment under Slurm
// would start it.
const rankOneWrapper = `#!/bin/sh
rank=${OMPI_COMM_WORLD_RANK:-$PMI_RANK}
if [ "$rank" = 1 ]; then
	[ -n "$RANK1_DIR" ] && cd "$RANK1_DIR"
	exec env $RANK1_ENV "$@"
fi
exec "$@"
`

// runRankOneApart runs np 2 of the binary with args, rank 1 with env1 and in dir1 (when not ""),
// the others from dir, and returns how it ended and how long it took.
func runRankOneApart(
	t *testing.T,
	dir, dir1, env1 string,
	args ...string,
) (mpirunResult, time.Duration) {
	t.Helper()
	res, took, _ := runRanksOneApart(t, 2, dir, dir1, env1, args...)
	return res, took
}

// runRanksOneApart is runRankOneApart at np ranks, and also returns when the job's stderr first
// said that the ranks were not given the same job (took when it never did).
func runRanksOneApart(
	t *testing.T,
	np int,
	dir, dir1, env1 string,
	args ...string,
) (mpirunResult, time.Duration, time.Duration) {
	t.Helper()
	wrapper := filepath.Join(t.TempDir(), "rank1.sh")
	if err := os.WriteFile(wrapper, []byte(rankOneWrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), loaded(60*time.Second))
	defer cancel()
	full := append(
		[]string{
			"-np",
			fmt.Sprint(np),
			"--oversubscribe",
			"--mca",
			"mpi_yield_when_idle",
			"1",
			"-x",
			"RANK1_ENV",
			"-x",
			"RANK1_DIR",
			wrapper,
			binPath,
		},
		args...)
	cmd := exec.CommandContext(ctx, "mpirun", full...)
	cmd.Env = append(mpirunEnv(t), "RANK1_ENV="+env1, "RANK1_DIR="+dir1)
	cmd.Dir = dir
	var stdout strings.Builder
	start := time.Now()
	stderr := &firstSaid{text: "the ranks were not given the same job", start: start}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	err := cmd.Run()
	res := mpirunResult{stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf(
			"mpirun %v did not finish within five minutes:\n%s%s",
			args,
			res.stdout,
			res.stderr,
		)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		res.exitCode = ee.ExitCode()
	}
	took := time.Since(start)
	if stderr.at == 0 {
		stderr.at = took
	}
	return res, took, stderr.at
}

// firstSaid is a command's output that notes when text first appeared in it, since start (exec.Cmd
// copies a pipe into a Writer from one goroutine, so it needs no lock).
type firstSaid struct {
	strings.Builder
	text  string
	start time.Time
	at    time.Duration
}

func (f *firstSaid) Write(p []byte) (int, error) {
	n, err := f.Builder.Write(p)
	if f.at == 0 && strings.Contains(f.String(), f.text) {
		f.at = time.Since(f.start)
	}
	return n, err
}

// A refusal of ranks given different settings ends the job soon after the ranks say it (within 2 s
// on a quiet node, bounded here for a loaded one), and every one of 8 ranks still says it. Each
// rank used to print after MPI_Finalize and then wait out the silent grace (2 s times the load per
// CPU, up to 20 s) so that a faster rank's exit could not cut its message off: 5 s after the
// refusal at a load of 2.4 per CPU, 11 to 21 s loaded.
func TestRanksGivenDifferentSettingsEndSoonAfterTheRefusal(t *testing.T) {
	besideOthers(t)
	res, took, refused := runRanksOneApart(
		t,
		8,
		t.TempDir(),
		"",
		"CPHICACHE_SEED=9",
		"run",
		"--conversations",
		"4",
	)
	if res.exitCode != 2 {
		t.Fatalf("exit %d, want 2:\n%s", res.exitCode, res.stderr)
	}
	if n := strings.Count(res.stderr, "the ranks were not given the same job"); n != 8 {
		t.Errorf(
			"%d ranks said the ranks were not given the same job, want all 8:\n%s",
			n,
			res.stderr,
		)
	}
	if after := took - refused; after > loaded(2*time.Second) {
		t.Errorf("the job ended %v after the refusal (%v after it started), want within %v:\n%s",
			after, took, loaded(2*time.Second), res.stderr)
	}
}

// Every command that runs under mpirun (run, validate, topo, a bench under mpirun) refuses ranks
// that were not given the same job before it builds anything (a --cp that differs, before the
// topology that would spin): every rank names the setting with the value it holds and where it came
// from, and the job exits 2 within seconds. A trace with the same path and another content on rank
// 1 is found by its content, and a trace on one rank only by --trace alone.
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
	if err := os.WriteFile(
		filepath.Join(traces1, "t.jsonl"), []byte(strings.Join(lines[:len(lines)/2], "")), 0o644,
	); err != nil {
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
		// a rank with another L2 policy would evict and admit otherwise: its slab would be corrupt
		{"CPHICACHE_L2_POLICY=slru", []string{"run", "--conversations", "4"}, `--l2-policy is "lru" here and differs`, `--l2-policy is "slru" here (from CPHICACHE_L2_POLICY)`},
		{"CPHICACHE_BENCH_STEP_ITERS=5", []string{"bench", "step", "--rounds", "1"}, `--iters is "2000" here and differs`, `--iters is "5" here (from CPHICACHE_BENCH_STEP_ITERS)`},
		{"", []string{"run", "--trace", "t.jsonl"}, `--trace's content is "`, `--trace's content is "`},
		// A trace on one rank only is --trace alone, not a list of names one longer ("different
		// builds", and every flag after it).
		{"CPHICACHE_TRACE=t.jsonl", []string{"run"}, `--trace is "" here and differs on another rank. Give`, `--trace is "t.jsonl" here (from CPHICACHE_TRACE) and differs on another rank. Give`},
	} {
		t.Run(strings.Join(tc.args[:min(2, len(tc.args))], "_"), func(t *testing.T) {
			t.Parallel()
			dir1 := ""
			if tc.env1 == "" {
				dir1 = traces1
			}
			res, took := runRankOneApart(t, traces, dir1, tc.env1, tc.args...)
			if res.exitCode != 2 ||
				took > spmd.SettingsTimeout { // the agreement's own watchdog would be later
				t.Errorf(
					"exit %d after %v, want 2 before the agreement's watchdog:\n%s",
					res.exitCode,
					took,
					res.stderr,
				)
			}
			for rank, want := range []string{tc.want, tc.want1} {
				line := lineWith(res.stderr, []string{"rank 0: ", "rank 1: "}[rank])
				if !strings.Contains(line, want) ||
					!strings.Contains(line, "Give every rank the same command line") {
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

// A settings refusal that every rank printed and met the others after (spmd.ReportedError, from
// spmd.StartJob) is neither printed again nor waited on: the wait is what held the job 11 to 21 s
// after the refusal. A bare one still is (its ranks print after MPI, each its own values, and must
// not be cut off by the first to exit).
func TestAReportedSettingsRefusalIsNotPrintedAgainNorWaitedOn(t *testing.T) {
	refusal := &spmd.SettingsError{
		Differ:   []spmd.Setting{{Name: "--seed", Value: "9"}},
		SameList: true,
	}
	var out strings.Builder
	if printError(&out, &spmd.ReportedError{Err: refusal}) || out.Len() != 0 {
		t.Errorf("a reported refusal: printed %q and waits, want neither", out.String())
	}
	if !printError(&out, refusal) || !strings.Contains(out.String(), `--seed is "9" here`) {
		t.Errorf(
			"a refusal not yet printed: printed %q, want it printed and waited on",
			out.String(),
		)
	}
}
