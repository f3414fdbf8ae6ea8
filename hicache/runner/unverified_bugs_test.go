//go:build simbugs

package runner

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/report"
)

// TestRunFailsAnUnverifiedLoadBack: with the deliberate bug bugVerifySkipsLastPage (VerifyLoad
// leaves each load-back's last page unchecked), a real run's bytes are all right, so it counts no
// mismatch, and only its pages loaded back beside its pages verified show the load-backs left
// unverified: the run must be FAILED by that check, naming it and both counts, where the same run
// without the bug, every page it loaded back verified, is not. SPMD: every rank carries the bug.
func TestRunFailsAnUnverifiedLoadBack(t *testing.T) {
	for _, bug := range []bool{false, true} {
		opts := smallOptions()
		opts.SyncCopies = true // backups commit in their step: load-backs however loaded the node
		tst := checked()
		if bug {
			tst.bugs = tst.bugs.with(bugVerifySkipsLastPage)
		}
		r, err := runTesting(testJob(t), opts, tst)
		if err != nil {
			t.Fatalf("bug %v: %v", bug, err)
		}
		v := r.Verify
		if v.PagesLoadedBack == 0 || v.Mismatches != 0 {
			t.Fatalf(
				"bug %v: %d pages loaded back, %d mismatches: want load-backs and no wrong byte",
				bug,
				v.PagesLoadedBack,
				v.Mismatches,
			)
		}
		if !bug {
			if v.PagesChecked != v.PagesLoadedBack || r.Failed() {
				t.Fatalf("without the bug: %+v, result %q", v, r.Verdict())
			}
			continue
		}
		f := r.Failure
		if r.Verdict() != "FAILED" || v.PagesChecked >= v.PagesLoadedBack || f == nil ||
			!strings.Contains(f.Check, report.UnverifiedCheck) ||
			!strings.Contains(f.Message, "pages loaded back") {
			t.Fatalf("with the bug: %+v, result %q, failure %+v", v, r.Verdict(), f)
		}
		var b strings.Builder
		r.WriteSummary(&b)
		if !strings.Contains(b.String(), "UNVERIFIED") ||
			!strings.Contains(b.String(), "result: FAILED: "+report.UnverifiedCheck) {
			t.Errorf("with the bug, the summary:\n%s", b.String())
		}
		t.Logf("with the bug: %s", r.RunFailure())
	}
	checkNoLeakedSegments(t)
}
