package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/shm"
)

// These tests run the real binary under the real mpirun, as a user would. The Makefile passes the
// binary it built in CPHICACHE_BIN; without it, TestMain builds one from the main package (the
// module's root).

var binPath string

// afterTests run once every test has, before the process exits (shared fixtures' clean-up).
var afterTests []func()

// testJobID names every job these tests start (CPHICACHE_JOB_ID, inherited by the binary and its
// ranks), so that checkNoSegments looks only at this suite's segments and not at those of other
// jobs on the same machine.
var testJobID = fmt.Sprintf("maintest%d", os.Getpid())

func TestMain(m *testing.M) {
	os.Setenv("CPHICACHE_JOB_ID", testJobID)
	binPath = os.Getenv("CPHICACHE_BIN")
	tempDir := ""
	if binPath == "" {
		dir, err := os.MkdirTemp("", "cphicache-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		binPath = filepath.Join(dir, "cphicache")
		if out, err := exec.Command("go", "build", "-o", binPath, "github.com/cphicache/cphicache").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			os.Exit(2)
		}
		tempDir = dir
	}
	code := m.Run()
	for _, fn := range afterTests {
		fn()
	}
	if !checkSuiteLeftNoSegments() && code == 0 {
		code = 1
	}
	// os.Exit skips deferred calls: remove the built binary explicitly.
	if tempDir != "" {
		os.RemoveAll(tempDir)
	}
	os.Exit(code)
}

// mpirunResult is the outcome of one mpirun of the binary.
type mpirunResult struct {
	stdout, stderr string
	exitCode       int
}

// mpirunCommand is mpirun of np ranks of the binary, with the flags OpenMPI needs here (as root,
// oversubscribed), as t's job (mpirunEnv).
func mpirunCommand(ctx context.Context, t *testing.T, np int, args ...string) *exec.Cmd {
	full := append(
		[]string{
			"-np",
			fmt.Sprint(np),
			"--oversubscribe",
			"--mca",
			"mpi_yield_when_idle",
			"1",
			binPath,
		},
		args...)
	cmd := exec.CommandContext(ctx, "mpirun", full...)
	cmd.Env = mpirunEnv(t)
	return cmd
}

// mpirunEnv is the environment of t's mpirun: this process's, what OpenMPI needs as root, and t's
// job id (jobIDOf), which a variable added after it overrides (the last of a duplicate name wins).
func mpirunEnv(t *testing.T) []string {
	return append(
		os.Environ(),
		"OMPI_ALLOW_RUN_AS_ROOT=1",
		"OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
		"CPHICACHE_JOB_ID="+jobIDOf(t),
	)
}

// loadedMachineFactor scales a job's bound, written for a quiet machine, to one that holds on a
// node loaded far beyond its cores (load average 20 on two cores, where a job took up to about four
// times as long): the bounds only turn a hang into a failure, so they are generous. (A claim that a
// job ends by agreement rather than by a watchdog is checked against a bound below the watchdog's
// timeout, which a job that waited for it cannot meet.)
const loadedMachineFactor = 5

// loaded is a quiet machine's bound for a job, scaled for a loaded one (loadedMachineFactor).
func loaded(quiet time.Duration) time.Duration { return quiet * loadedMachineFactor }

// runMPI launches np ranks of the binary with the flags OpenMPI needs here (as root,
// oversubscribed), bounded in time (loaded(timeout)) so that a hang fails the test instead of the
// suite.
func runMPI(t *testing.T, np int, timeout time.Duration, args ...string) mpirunResult {
	t.Helper()
	return runMPIEnv(t, np, timeout, nil, args...)
}

// runMPIEnv is runMPI with more environment variables (NAME=value) for the job: a test that runs
// beside others cannot set its own process's (t.Setenv).
func runMPIEnv(
	t *testing.T,
	np int,
	timeout time.Duration,
	env []string,
	args ...string,
) mpirunResult {
	t.Helper()
	timeout = loaded(timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := mpirunCommand(ctx, t, np, args...)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf(
			"mpirun -np %d %v did not finish within %v\nstdout:\n%s\nstderr:\n%s",
			np,
			args,
			timeout,
			stdout.String(),
			stderr.String(),
		)
	}
	res := mpirunResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		res.exitCode = -1
		if ee, ok := err.(*exec.ExitError); ok {
			res.exitCode = ee.ExitCode()
		}
	}
	return res
}

func TestTopoCP8DP2PrintsTwoGroupsOfEight(t *testing.T) {
	besideOthers(t)
	res := runMPI(t, 16, 60*time.Second, "topo", "--cp", "8", "--dp", "2")
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	groups := map[string]int{}
	rows := 0
	for _, line := range strings.Split(res.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) != 7 || strings.HasPrefix(line, "#") {
			continue
		}
		rows++
		groups[f[3]]++
	}
	if rows != 16 || len(groups) != 2 || groups["0"] != 8 || groups["1"] != 8 {
		t.Fatalf(
			"want 16 rows in two CP groups of 8, got %d rows, groups %v:\n%s",
			rows,
			groups,
			res.stdout,
		)
	}
}

func TestBadLayoutFailsNamingTheFlag(t *testing.T) {
	besideOthers(t)
	for _, tc := range []struct {
		np   int
		args []string
		want string
	}{
		{8, []string{"topo", "--cp", "3"}, "invalid --cp"},
		{8, []string{"topo", "--cp", "4", "--dp", "3"}, "invalid --dp"},
		{2, []string{"topo", "--cp", "4"}, "invalid --cp"},
		{2, []string{"topo", "--cp", "0"}, "invalid --cp"},
		{2, []string{"topo", "--log-level", "loud"}, "invalid --log-level"},
		{2, []string{"topo", "--no-such-flag"}, "no-such-flag"},
	} {
		t.Run("", func(t *testing.T) {
			t.Parallel() // side by side: the cases share nothing
			res := runMPI(t, tc.np, 60*time.Second, tc.args...)
			if res.exitCode == 0 {
				t.Errorf("np %d %v: exit 0, want failure", tc.np, tc.args)
			}
			if n := strings.Count(res.stderr, tc.want); n != 1 {
				t.Errorf(
					"np %d %v: %q appears %d times in stderr, want once (printed by one rank):\n%s",
					tc.np,
					tc.args,
					tc.want,
					n,
					res.stderr,
				)
			}
		})
	}
}

func TestSingleRankWithoutMpirun(t *testing.T) {
	out, err := exec.Command(binPath, "topo").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 rank, cp 1, dp 1") {
		t.Fatalf("cphicache topo without mpirun: %v\n%s", err, out)
	}
	out, err = exec.Command(binPath, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "cphicache") {
		t.Fatalf("cphicache version: %v\n%s", err, out)
	}
	// The library by name and version, and the standard's version: "MPI library: MPICH 4.0.2 (MPI
	// 4.0)".
	if !regexp.MustCompile(`(?m)^MPI library: \S.*[0-9].* \(MPI [0-9]+\.[0-9]+\)$`).Match(out) {
		t.Errorf(
			"cphicache version does not name the MPI library, its version and the MPI standard's:\n%s",
			out,
		)
	}
}

func TestBadMPIYieldSettingFailsBeforeMPIStarts(t *testing.T) {
	cmd := exec.Command(binPath, "topo")
	cmd.Env = append(os.Environ(), "CPHICACHE_MPI_YIELD=often")
	out, err := cmd.CombinedOutput()
	if err == nil || strings.Count(string(out), `CPHICACHE_MPI_YIELD="often"`) != 1 ||
		strings.Contains(string(out), "rank 0") {
		t.Fatalf(
			"topo with CPHICACHE_MPI_YIELD=often: %v, want one line naming the setting (as for a bad flag):\n%s",
			err,
			out,
		)
	}
}

// readReport parses a report written by `cphicache run --report`.
func readReport(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("report: %v", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("report %s: %v", path, err)
	}
	return m
}

// reportNumber reads a dotted key ("verify.mismatches") of a report.
func reportNumber(t *testing.T, m map[string]any, key string) float64 {
	t.Helper()
	var v any = m
	for _, part := range strings.Split(key, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("report key %s: %v is not an object", key, v)
		}
		if v, ok = obj[part]; !ok {
			t.Fatalf("report has no key %s", key)
		}
	}
	f, ok := v.(float64)
	if !ok {
		t.Fatalf("report key %s = %v, not a number", key, v)
	}
	return f
}

func TestRunDefaultWorkloadAtEveryScale(t *testing.T) {
	besideOthers(t)
	for _, tc := range []struct {
		np   int
		args []string
	}{
		{1, nil}, {2, nil}, {8, nil}, {16, []string{"--cp", "8", "--dp", "2"}},
	} {
		report := filepath.Join(t.TempDir(), "report.json")
		args := append([]string{"run", "--quiet", "--report", report}, tc.args...)
		res := runMPI(t, tc.np, 180*time.Second, args...)
		if res.exitCode != 0 {
			t.Fatalf("np %d: exit %d\n%s%s", tc.np, res.exitCode, res.stdout, res.stderr)
		}
		if !strings.Contains(res.stdout, "result: OK") {
			t.Errorf("np %d: the summary does not say OK:\n%s", tc.np, res.stdout)
		}
		m := readReport(t, report)
		for _, key := range []string{"placement.divergences", "verify.mismatches", "verify.audit_mismatches", "verify.copy_errors"} {
			if v := reportNumber(t, m, key); v != 0 {
				t.Errorf("np %d: %s = %v, want 0", tc.np, key, v)
			}
		}
		// A CP group of one rank has nothing to compare: the asserts are skipped, and the report
		// says so.
		checked, skipped := reportNumber(
			t,
			m,
			"placement.checks",
		), reportNumber(
			t,
			m,
			"placement.skipped",
		)
		if singleRank := tc.np == 1; (checked == 0) != singleRank || (skipped > 0) != singleRank {
			t.Errorf(
				"np %d: placement.checks = %v, placement.skipped = %v",
				tc.np,
				checked,
				skipped,
			)
		}
		if tc.np == 1 && !strings.Contains(res.stdout, "placement: assert skipped (cp 1") {
			t.Errorf(
				"np 1: the summary does not say the placement assert was skipped:\n%s",
				res.stdout,
			)
		}
		for _, key := range []string{"hits.l2_tokens", "backup.l2_evictions", "flushes", "verify.pages_checked",
			"hits.l1_tokens", "hits.miss_tokens", "backup.reserved", "backup.committed", "bytes.d2h", "bytes.h2d", "steps", "requests", "wall_seconds"} {
			if v := reportNumber(t, m, key); v <= 0 {
				t.Errorf("np %d: %s = %v, want > 0", tc.np, key, v)
			}
		}
		for _, key := range []string{"backup.reserve_misses", "writing_check_us.p50", "writing_check_us.p99"} {
			reportNumber(t, m, key) // present
		}
		// Every commit is audited whole by one rank; every step makes one consensus call (plus the
		// flush's).
		if audited, committed := reportNumber(t, m, "verify.audit_objects"), reportNumber(t, m, "backup.committed"); audited != committed {
			t.Errorf("np %d: %v objects audited, %v committed", tc.np, audited, committed)
		}
		if perStep := reportNumber(t, m, "consensus.calls_per_step"); tc.np > 1 &&
			(perStep < 1 || perStep > 1.05) {
			t.Errorf(
				"np %d: consensus.calls_per_step = %v, want 1 and a flush's worth",
				tc.np,
				perStep,
			)
		}
		if got := reportNumber(t, m, "ranks"); int(got) != tc.np {
			t.Errorf("np %d: ranks = %v", tc.np, got)
		}
	}
	checkNoSegments(t)
}

// failedReport is what a failed run's report must hold: FAILED, the counters, and what ended the
// run.
type failedReport struct {
	Result    string `json:"result"`
	Placement struct {
		Divergences int64 `json:"divergences"`
	} `json:"placement"`
	Verify struct {
		CopyErrors int64 `json:"copy_errors"`
	} `json:"verify"`
	Hits struct {
		L1Tokens    int64 `json:"l1_tokens"`
		L2Tokens    int64 `json:"l2_tokens"`
		MissTokens  int64 `json:"miss_tokens"`
		IdealTokens int64 `json:"ideal_tokens"`
	} `json:"hits"`
	Failure *struct {
		Check     string `json:"check"`
		Step      int64  `json:"step"`
		WorldRank int    `json:"world_rank"`
		Message   string `json:"message"`
	} `json:"failure"`
}

func checkNoSegments(t *testing.T) {
	t.Helper()
	if matches, err := shm.JobSegments(jobIDOf(t)); err != nil || len(matches) != 0 {
		t.Errorf("shared memory left behind: %v %v", matches, err)
	}
}
