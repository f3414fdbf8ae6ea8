package cli

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// validateChecks are the rows of validate's table, in order.
var validateChecks = []string{"placement_identical", "divergence_detected", "flush_reset", "cp_scoping", "capacity_miss_uniform", "data_integrity", "l3_roundtrip"}

// TestValidateSaysItsPassesAndChecks: validate prints a progress line per pass on stderr and no WARN for the
// read failures it injects on purpose; its table has the seven checks its --help names with the five passes; at
// np 1 the closing line says which checks were skipped and why.
func TestValidateSaysItsPassesAndChecks(t *testing.T) {
	res := runMPI(t, 2, 60*time.Second, "validate", "--conversations", "30")
	if res.exitCode != 0 || !strings.Contains(res.stdout, "# 7 checks: 7 passed, 0 failed") {
		t.Fatalf("exit %d, want 0 and seven passed checks:\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	for pass := 1; pass <= 5; pass++ {
		if want := fmt.Sprintf("cphicache: validate pass %d of 5: ", pass); !strings.Contains(res.stderr, want) {
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
	if err != nil || !strings.Contains(string(one), "# 7 checks: 5 passed, 2 skipped (not applicable to single-rank CP groups: run with cp 2 or more), 0 failed") {
		t.Errorf("validate at np 1: %v\n%s", err, one)
	}
	checkNoSegments(t)
}
