package hicache

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// TestRunFailedIsPrintedOnce: the verdict comes from the report aggregated over every rank, so it is uniform and
// spmd.Job.Fail prints it on world rank 0 only.
func TestRunFailedIsPrintedOnce(t *testing.T) {
	if spmd.ScopeOf(&RunFailed{Mismatches: 3}) != spmd.JobScope {
		t.Fatal("RunFailed is not uniform: every rank would print it")
	}
}

// TestSummarySaysWhatWasNotChecked: at cp 1 the summary says the placement assert was skipped, and a run that
// loaded nothing back says that no data was verified; neither is a plain OK.
func TestSummarySaysWhatWasNotChecked(t *testing.T) {
	summary := func(cp int, pagesChecked int64) string {
		r := &Report{Ranks: cp, CP: cp, DP: 1}
		c := &cache.Counters{PlacementChecks: 5, PagesChecked: pagesChecked}
		if cp == 1 { // a one-rank group's consensus calls are skipped, and so no digest is compared
			c.PlacementChecks, c.ConsensusSkipped = 0, 5
		}
		r.fill(c)
		var b strings.Builder
		r.WriteSummary(&b)
		return b.String()
	}
	for _, tc := range []struct {
		cp           int
		pages        int64
		want, reject []string
	}{
		{2, 10, []string{"placement: 5 digest checks", "10 load-back pages checked", "result: OK\n"}, []string{"assert skipped", "NOTHING"}},
		{1, 10, []string{"placement: assert skipped (cp 1", "5 consensus calls skipped", "result: OK, but placement not compared (cp 1)\n"}, []string{"5 digest checks"}},
		{2, 0, []string{"verify: NOTHING VERIFIED", "result: OK, but no data verified (0 load-backs)\n"}, []string{"0 pages checked"}},
	} {
		got := summary(tc.cp, tc.pages)
		for _, want := range tc.want {
			if !strings.Contains(got, want) {
				t.Errorf("cp %d, %d pages: the summary lacks %q:\n%s", tc.cp, tc.pages, want, got)
			}
		}
		for _, reject := range tc.reject {
			if strings.Contains(got, reject) {
				t.Errorf("cp %d, %d pages: the summary says %q:\n%s", tc.cp, tc.pages, reject, got)
			}
		}
	}
}
