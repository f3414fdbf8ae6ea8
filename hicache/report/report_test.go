package report

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// TestRunFailedIsPrintedOnce: the verdict comes from the report aggregated over every rank, so it
// is uniform and spmd.Job.Fail prints it on world rank 0 only.
func TestRunFailedIsPrintedOnce(t *testing.T) {
	if errscope.Of(&RunFailed{Mismatches: 3}) != errscope.JobScope {
		t.Fatal("RunFailed is not uniform: every rank would print it")
	}
}

// TestSummarySaysWhatWasNotChecked: at cp 1 the summary says the placement assert was skipped, and
// a run that loaded nothing back says that no data was verified; neither is a plain OK.
func TestSummarySaysWhatWasNotChecked(t *testing.T) {
	summary := func(cp int, pagesChecked int64) string {
		r := &Report{Ranks: cp, CP: cp, DP: 1}
		c := &Tallies{PlacementChecks: 5, PagesLoadedBack: pagesChecked, PagesChecked: pagesChecked}
		if cp == 1 { // a one-rank group's consensus calls are skipped, and so no digest is compared
			c.PlacementChecks, c.ConsensusSkipped = 0, 5
		}
		r.Fill(c)
		var b strings.Builder
		r.WriteSummary(&b)
		return b.String()
	}
	for _, tc := range []struct {
		cp           int
		pages        int64
		want, reject []string
	}{
		{2, 10, []string{"placement: 5 digest checks", "10 load-back pages checked of 10 loaded back, 0 mismatches;", "result: OK\n"}, []string{"assert skipped", "NOTHING"}},
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

// TestSummarySaysWhatWentWrongWithoutChangingData: pages L1 could not hold, L3 block writes that
// failed and an --l3-bytes smaller than one block each end the summary as "OK, but ...", never a
// plain OK; the uncached pages are also in the L2 line with their share of the prompts' pages.
func TestSummarySaysWhatWentWrongWithoutChangingData(t *testing.T) {
	base := func() *Report {
		r := &Report{Ranks: 2, CP: 2, DP: 1}
		r.Fill(&Tallies{PlacementChecks: 5, PagesLoadedBack: 10, PagesChecked: 10, MissTokens: 16 * 1000})
		r.Capacity = Capacity{DevicePages: 8, DeviceTokens: 8 * 16, CopiedTokenBytes: 64}
		return r
	}
	summary := func(r *Report) string {
		var b strings.Builder
		r.WriteSummary(&b)
		return b.String()
	}
	uncached := base()
	uncached.L1.UncachedPages, uncached.L1.UncachedOversizePages = 250, 250
	want := "result: OK, but 250 pages (25.0%) not cached: a request needs more L1 than --device-pages gives\n"
	if s := summary(uncached); !strings.Contains(s, want) ||
		!strings.Contains(s, "load-backs; 250 pages (25.0%) not cached") {
		t.Errorf("a run with uncached pages: want %q and the L2 line to say it:\n%s", want, s)
	}
	// pages in use or being copied when a request needed them: a capacity effect, not a caveat
	busy := base()
	busy.L1.UncachedPages = 250
	if s := summary(busy); !strings.Contains(s, "result: OK\n") ||
		!strings.Contains(s, "250 pages (25.0%) not cached (L1 had no page to spare") {
		t.Errorf(
			"a run whose L1 was busy: want a plain OK and the L2 line to say why pages went uncached:\n%s",
			s,
		)
	}
	l3 := base()
	l3.L3 = &L3Report{BlockTokens: 64, Bytes: 1000, WriteErrors: 809, Evictions: 8089}
	for _, want := range []string{"809 L3 block writes failed", "--l3-bytes 1000 is smaller than one block (4 KiB): every block written was evicted (8089)"} {
		if s := summary(l3); !strings.Contains(s, "result: OK, but ") ||
			!strings.Contains(s, want) {
			t.Errorf("a run with L3 trouble: want %q in the result:\n%s", want, s)
		}
	}
	l3.L3.WriteErrors, l3.L3.Bytes = 0, 1<<30
	if s := summary(l3); !strings.Contains(s, "result: OK\n") {
		t.Errorf("a run whose L3 had no trouble is not a plain OK:\n%s", s)
	}
}

// TestIdealIsNamedForWhatItIsWithAnL3: an L3 outlives flushes and jobs, so its hits can exceed the
// ideal of an unbounded in-job cache; with an L3 the summary calls it the in-job ideal, without one
// the ideal hit.
func TestIdealIsNamedForWhatItIsWithAnL3(t *testing.T) {
	r := &Report{Ranks: 2, CP: 2, DP: 1}
	r.Fill(
		&Tallies{PagesLoadedBack: 10, PagesChecked: 10, IdealHitTokens: 70, L1HitTokens: 50, MissTokens: 50},
	)
	var without, with strings.Builder
	r.WriteSummary(&without)
	r.L3 = &L3Report{BlockTokens: 64, Bytes: 1 << 30}
	r.WriteSummary(&with)
	if !strings.Contains(without.String(), "; ideal hit 70 (70.0%, an unbounded cache)") {
		t.Errorf("without an L3:\n%s", without.String())
	}
	if !strings.Contains(
		with.String(),
		"; in-job ideal 70 (70.0%, an unbounded L1 + L2 since the last flush; the L3 can exceed it)",
	) {
		t.Errorf("with an L3:\n%s", with.String())
	}
}

// TestSummaryCountsInEnglish: one flush, one divergence and one page are said in the singular.
func TestSummaryCountsInEnglish(t *testing.T) {
	r := &Report{Ranks: 2, CP: 2, DP: 1, Flushes: 1}
	r.Capacity.DevicePages, r.Capacity.L2Slots = 1, 1
	r.Fill(&Tallies{PagesLoadedBack: 1, PagesChecked: 1, Divergences: 1, Flushes: 1, PlacementChecks: 1})
	var b strings.Builder
	r.WriteSummary(&b)
	for _, want := range []string{"; 1 flush\n", "1 digest check,", "1 divergence\n", "1 load-back page checked of 1 loaded back, 0 mismatches", "L1 1 page =", "L2 1 slot ="} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in:\n%s", want, b.String())
		}
	}
}

// TestAOneRankGroupPrintsNoLatency: at cp 1 every consensus call is skipped, so the summary says so
// instead of latencies of 0.0 us that were never measured.
func TestAOneRankGroupPrintsNoLatency(t *testing.T) {
	r := &Report{Ranks: 1, CP: 1, DP: 1}
	r.Fill(&Tallies{ConsensusSkipped: 12, PagesLoadedBack: 10, PagesChecked: 10})
	var b strings.Builder
	r.WriteSummary(&b)
	if s := b.String(); !strings.Contains(
		s,
		"step consensus: none (12 calls skipped: a CP group of one rank has no collective to run)",
	) ||
		strings.Contains(s, "latency") {
		t.Errorf("cp 1: want the consensus said skipped, no latency:\n%s", s)
	}
}
