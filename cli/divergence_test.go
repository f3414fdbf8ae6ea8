package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Runs that fail, and say so: an injected divergence, and a run that verified nothing.

func TestInjectedDivergenceEndsTheJob(t *testing.T) {
	besideOthers(t)
	reportPath := filepath.Join(t.TempDir(), "r.json")
	res := runMPI(
		t,
		4,
		120*time.Second,
		"run",
		"--quiet",
		"--inject-divergence",
		"2@5",
		"--placement-assert-every",
		"4",
		"--report",
		reportPath,
	)
	if res.exitCode == 0 {
		t.Fatalf("the job exited 0 despite a perturbed allocator:\n%s", res.stderr)
	}
	// The digest rides in every step's consensus: the perturbation after step 5's is caught at step
	// 6.
	if !strings.Contains(res.stderr, "placement divergence in CP group 0 at step 6") ||
		!strings.Contains(res.stderr, "CP ranks [2]") {
		t.Errorf("the message does not name the step and the divergent rank:\n%s", res.stderr)
	}
	// The failed run still writes its report, with the failure in it, and says FAILED in its
	// summary.
	report := readFailedReport(t, reportPath, res)
	if f := report.Failure; report.Placement.Divergences == 0 || f.Check != "placement" ||
		f.Step != 6 ||
		!strings.Contains(f.Message, "CP ranks [2]") {
		t.Errorf(
			"the report of the failed run: result %q, %d divergences, failure %+v",
			report.Result,
			report.Placement.Divergences,
			f,
		)
	}
	if !strings.Contains(res.stdout, "result: FAILED: placement at step 6") {
		t.Errorf("the summary does not say the run FAILED at step 6:\n%s", res.stdout)
	}
	// The ideal is that of the requests the replay served before it ended, never above their prompt
	// tokens.
	h := report.Hits
	if served := h.L1Tokens + h.L2Tokens + h.MissTokens; h.IdealTokens <= 0 ||
		h.IdealTokens > served {
		t.Errorf(
			"ideal hit %d tokens of the %d tokens the failed run served:\n%s",
			h.IdealTokens,
			served,
			res.stdout,
		)
	}
	checkNoSegments(t)
}

// readFailedReport reads the report a failed run wrote, which must say FAILED and what failed.
func readFailedReport(t *testing.T, path string, res mpirunResult) failedReport {
	t.Helper()
	var report failedReport
	if b, err := os.ReadFile(path); err != nil || json.Unmarshal(b, &report) != nil {
		t.Fatalf("the failed run wrote no report: %v\n%s", err, res.stderr)
	}
	if report.Result != "FAILED" || report.Failure == nil {
		t.Fatalf(
			"the failed run's report: result %q, failure %+v; want FAILED and the failure",
			report.Result,
			report.Failure,
		)
	}
	return report
}

// TestRunThatVerifiesNothingSaysSo: a workload that fits in L1 never loads a page back from L2, so
// no byte is verified; the summary must say so rather than a plain OK.
func TestRunThatVerifiesNothingSaysSo(t *testing.T) {
	res := runMPI(
		t,
		2,
		60*time.Second,
		"run",
		"--quiet",
		"--conversations",
		"4",
		"--turns-max",
		"2",
		"--device-pages",
		"4096",
	)
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	for _, want := range []string{"verify: NOTHING VERIFIED", "result: OK, but no data verified (0 load-backs)"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("the summary does not say %q:\n%s", want, res.stdout)
		}
	}
	checkNoSegments(t)
}
