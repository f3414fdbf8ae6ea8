package cli

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// validateChecks are the rows of validate's table, in order.
var validateChecks = []string{
	"placement_identical",
	"divergence_detected",
	"flush_reset",
	"cp_scoping",
	"capacity_miss_uniform",
	"data_integrity",
	"l3_roundtrip",
}

// TestValidateSaysItsPassesAndChecks: validate prints a progress line per pass on stderr and no
// WARN for the read failures it injects on purpose; its table has the seven checks its --help names
// with the five passes; at np 1 the closing line says which checks were skipped and why
// (l3_roundtrip too: no read failed at cp 1).
func TestValidateSaysItsPassesAndChecks(t *testing.T) {
	res := runMPI(t, 2, 60*time.Second, "validate", "--conversations", "30")
	if res.exitCode != 0 || !strings.Contains(res.stdout, "# 7 checks: 7 passed, 0 failed") {
		t.Fatalf(
			"exit %d, want 0 and seven passed checks:\n%s%s",
			res.exitCode,
			res.stdout,
			res.stderr,
		)
	}
	for pass := 1; pass <= 5; pass++ {
		if want := fmt.Sprintf("cphicache: validate pass %d of 5: ", pass); !strings.Contains(
			res.stderr,
			want,
		) {
			t.Errorf("no progress line %q:\n%s", want, res.stderr)
		}
	}
	if strings.Contains(res.stderr, "WARN") {
		t.Errorf("a passing validate printed a warning:\n%s", res.stderr)
	}
	help, _ := exec.Command(binPath, "validate", "--help").CombinedOutput()
	for _, want := range append([]string{"five passes", "seven checks"}, validateChecks...) {
		if !strings.Contains(res.stdout, want) && !strings.Contains(want, " ") {
			t.Errorf("the table has no row %s:\n%s", want, res.stdout)
		}
		if !strings.Contains(string(help), want) {
			t.Errorf("validate --help does not say %q:\n%s", want, help)
		}
	}
	one, err := exec.Command(binPath, "validate", "--quiet", "--conversations", "30").Output()
	if err != nil ||
		!strings.Contains(
			string(one),
			"# 7 checks: 4 passed, 3 skipped (not applicable to single-rank CP groups: run with cp 2 or more), 0 failed",
		) {
		t.Errorf("validate at np 1: %v\n%s", err, one)
	}
	checkNoSegments(t)
}

// TestValidateSaysWhatItDidNotExercise: a workload that never misses the L2 and never loads back
// (one conversation of one turn) leaves those checks unexercised: the table says so, they are skips
// with their reason (in the JSON too), and validate exits 0, or 5 with --strict; it used to call
// them failures with nothing wrong.
func TestValidateSaysWhatItDidNotExercise(t *testing.T) {
	besideOthers(t)
	report := filepath.Join(t.TempDir(), "validate.json")
	args := []string{
		"validate",
		"--quiet",
		"--conversations",
		"1",
		"--turns-max",
		"1",
		"--device-pages",
		"64",
		"--report",
		report,
	}
	out, err := exec.Command(binPath, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "2 skipped (not exercised by this workload") {
		t.Fatalf(
			"validate of one turn: %v, want exit 0 and two checks not exercised:\n%s",
			err,
			out,
		)
	}
	for _, row := range []string{"capacity_miss_uniform       1        1    skip       0  not exercised: ", "data_integrity              1        3    skip       0  not exercised: "} {
		if !strings.Contains(string(out), row) {
			t.Errorf("no row %q:\n%s", row, out)
		}
	}
	if b, err := os.ReadFile(report); err != nil ||
		strings.Count(string(b), `"skipped": "not_exercised"`) != 2 {
		t.Errorf("the JSON report does not give the reason of both skips: %v\n%s", err, b)
	} else if !strings.Contains(string(b), `"result": "OK, but `) {
		t.Errorf("the JSON report has no result saying what was skipped:\n%s", b)
	}
	out, err = exec.Command(binPath, append([]string{"validate", "--strict"}, args[1:]...)...).
		CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != spmd.ExitNotCovered {
		t.Errorf(
			"validate --strict of one turn: %v, want exit %d:\n%s",
			err,
			spmd.ExitNotCovered,
			out,
		)
	}
}

// TestValidateDivergenceRowOnShortWorkloads: a workload that ends before the divergence pass's
// perturbation (step
//  5. never perturbs a rank: the row is a skip that says so, not a failure (it was "fail, 0
//     detections"). One
//
// that ends at step 5 is perturbed and caught by its final consensus, still at step 5: a pass, not
// "caught late".
func TestValidateDivergenceRowOnShortWorkloads(t *testing.T) {
	besideOthers(t)
	for _, tc := range []struct{ conversations, row string }{
		// One request: one step.
		{"1", "divergence_detected         2        1    skip       0  not exercised: never perturbed: the workload ended before step 5, "},
		// 17 one-turn conversations in batches of 4: five steps.
		{"17", "divergence_detected         2        5    pass       0  perturbed after step 5's consensus"},
	} {
		res := runMPI(
			t,
			2,
			60*time.Second,
			"validate",
			"--quiet",
			"--conversations",
			tc.conversations,
			"--turns-max",
			"1",
		)
		if res.exitCode != 0 || !strings.Contains(res.stdout, tc.row) {
			t.Errorf(
				"validate of %s one-turn conversations: exit %d, want 0 and the row %q:\n%s%s",
				tc.conversations,
				res.exitCode,
				tc.row,
				res.stdout,
				res.stderr,
			)
		}
	}
	checkNoSegments(t)
}

// TestValidateRemovesTheL3DirOfAKilledValidate: a validate killed before its clean-up ends
// (mpirun's SIGKILL comes a second after its SIGTERM, and removing a large job's blocks takes
// longer) leaves its L3 directory; the next validate over the same base removes it, and its own.
func TestValidateRemovesTheL3DirOfAKilledValidate(t *testing.T) {
	besideOthers(t)
	base := t.TempDir()
	env := append(os.Environ(), "CPHICACHE_JOB_ID="+jobIDOf(t))
	killed := exec.Command(binPath, "validate", "--conversations", "400", "--l3-dir", base)
	killed.Env = env
	stderr, err := killed.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	bound := time.AfterFunc(
		loaded(60*time.Second),
		func() { killed.Process.Kill() },
	) // a hang fails, not waits
	defer bound.Stop()
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "validate pass 4 of 5") {
	}
	killed.Process.Kill()
	killed.Wait()
	segments, _ := shm.JobSegments(jobIDOf(t)) // its slab: the kill left it too
	for _, name := range segments {
		os.Remove(filepath.Join(shm.Dir, name))
	}
	if left, _ := filepath.Glob(filepath.Join(base, "cphicache-validate-l3-*")); len(left) != 1 {
		t.Fatalf("the killed validate left %v, want its L3 directory", left)
	}
	cmd := exec.Command(binPath, "validate", "--quiet", "--conversations", "5", "--l3-dir", base)
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the next validate: %v\n%s", err, out)
	}
	// (The base also holds the L3 namespace of the passes that use --l3-dir as it is.)
	if left, _ := filepath.Glob(filepath.Join(base, "cphicache-validate-l3-*")); len(left) != 0 {
		t.Errorf("the next validate left %v", left)
	}
	checkNoSegments(t)
}

// TestValidateRefusesAnL3DirItCannotWriteAtOnce: a --l3-dir where validate cannot make its
// directory (sysfs refuses even root) fails the job before its first pass, with exit 2; it ran
// three passes over that L3 first, each warning that it is read-only.
func TestValidateRefusesAnL3DirItCannotWriteAtOnce(t *testing.T) {
	besideOthers(t)
	const base = "/sys/kernel"
	if err := os.Mkdir(filepath.Join(base, "cphicache-probe"), 0o755); err == nil ||
		errors.Is(err, os.ErrNotExist) {
		os.Remove(filepath.Join(base, "cphicache-probe"))
		t.Skipf("%s takes a directory here, or is not there (%v)", base, err)
	}
	out, err := exec.Command(binPath, "validate", "--conversations", "5", "--l3-dir", base).
		CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 ||
		!strings.Contains(string(out), "invalid --l3-dir: validate's L3 directory") {
		t.Errorf(
			"validate --l3-dir %s: %v, want exit 2 naming its L3 directory:\n%s",
			base,
			err,
			out,
		)
	}
	if strings.Contains(string(out), "validate pass") || strings.Contains(string(out), "WARN") {
		t.Errorf("validate ran passes before it refused %s:\n%s", base, out)
	}
}
