package report

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// A load-back released without its byte-for-byte check has right bytes as often as not, so no
// mismatch can show it: the report sets the pages loaded back beside the pages verified, and a run
// in which they differ fails.

// unverifiedReport is a sound cp 2 run's report but for its pages verified.
func unverifiedReport(loadedBack, checked int64) *Report {
	r := &Report{Ranks: 2, CP: 2, DP: 1}
	r.Fill(&Tallies{PlacementChecks: 5, PagesLoadedBack: loadedBack, PagesChecked: checked})
	return r
}

// TestEveryPageLoadedBackVerifiedIsOK: pages verified equal to pages loaded back is a plain OK,
// the summary says both, and the JSON carries both under verify.
func TestEveryPageLoadedBackVerifiedIsOK(t *testing.T) {
	r := unverifiedReport(40, 40)
	if v := r.Verdict(); v != "OK" || r.RunFailure() != nil {
		t.Fatalf("40 pages loaded back, 40 verified: verdict %q, failure %v", v, r.RunFailure())
	}
	var b strings.Builder
	r.WriteSummary(&b)
	if want := "verify: 40 load-back pages checked of 40 loaded back, 0 mismatches;"; !strings.Contains(
		b.String(),
		want,
	) || strings.Contains(b.String(), "UNVERIFIED") {
		t.Errorf("the summary lacks %q (or says UNVERIFIED):\n%s", want, b.String())
	}
	js, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Verify map[string]int64 `json:"verify"`
	}
	if err := json.Unmarshal(js, &got); err != nil {
		t.Fatal(err)
	}
	if got.Verify["pages_loaded_back"] != 40 || got.Verify["pages_checked"] != 40 {
		t.Errorf("the report's verify: %v, want pages_loaded_back and pages_checked 40", got.Verify)
	}
}

// TestALoadBackLeftUnverifiedFails: fewer pages verified than loaded back (none of them wrong) is
// FAILED, not OK and not "OK, but", naming the check and both counts on the result line and in the
// run's error; so is a run that verified none of the pages it loaded back, which must not read
// as one that loaded nothing back.
func TestALoadBackLeftUnverifiedFails(t *testing.T) {
	for _, tc := range []struct{ loadedBack, checked int64 }{{40, 33}, {12, 0}} {
		r := unverifiedReport(tc.loadedBack, tc.checked)
		if v := r.Verdict(); v != "FAILED" || !r.Failed() || r.NotCovered() != nil {
			t.Errorf("%d loaded back, %d verified: verdict %q", tc.loadedBack, tc.checked, v)
		}
		var b strings.Builder
		r.WriteSummary(&b)
		counts := "unverified load-back: " + itoa(tc.loadedBack) + " pages loaded back, " +
			itoa(tc.checked) + " verified"
		for _, want := range []string{
			" checked of " + itoa(tc.loadedBack) + " loaded back (" +
				itoa(tc.loadedBack-tc.checked) + " UNVERIFIED), 0 mismatches",
			"result: FAILED: " + counts + "\n",
		} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("the summary lacks %q:\n%s", want, b.String())
			}
		}
		if strings.Contains(b.String(), "NOTHING VERIFIED: no page was loaded back") {
			t.Errorf("the summary says nothing was loaded back:\n%s", b.String())
		}
		var failed *RunFailed
		if err := r.RunFailure(); !errors.As(err, &failed) ||
			!strings.HasSuffix(err.Error(), ", "+counts) {
			t.Errorf("the run's error: %v, want it to end %q", err, ", "+counts)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
