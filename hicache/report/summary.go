package report

import (
	"fmt"
	"io"

	"github.com/cphicache/cphicache/internal/errscope"
)

// The summary's lines, one helper a line or a few that belong together, in the order WriteSummary
// prints them (report.go): the run, the prompt tokens by tier, the L2 backups, the copies, the
// step consensus, the placement assert, the verification, and the result.

// sharePct is part's share of whole in percent, 0 when whole is 0, so that an empty run prints
// 0.0% rather than NaN.
func sharePct(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// writeRunLine prints the summary's heading, what ran and on how many ranks, and the line of
// requests, steps and wall seconds under it, so that a reader knows the run before its numbers.
func (r *Report) writeRunLine(w io.Writer) {
	fmt.Fprintf(
		w,
		"# cphicache run: %s, cp %d, dp %d, layout %s, %s, step consensus over %s\n",
		errscope.Plural(r.Ranks, "rank"),
		r.CP,
		r.DP,
		r.Layout,
		r.Policy,
		r.Transport,
	)
	fmt.Fprintf(w, "  requests %d in %d steps, %.2f s wall\n", r.Requests, r.Steps, r.WallSeconds)
}

// writePromptTokens prints the prompt tokens by the tier that served them, each with its share of
// all prompt tokens, and the ideal to compare the hits with: the line that says how well the
// cache did.
func (r *Report) writePromptTokens(w io.Writer) {
	tokens := r.Hits.L1Tokens + r.Hits.L2Tokens + r.Hits.L3Tokens + r.Hits.MissTokens
	l3Hits := ""
	if r.L3 != nil {
		l3Hits = fmt.Sprintf(
			", L3 hit %d (%.1f%%)",
			r.Hits.L3Tokens,
			sharePct(r.Hits.L3Tokens, tokens),
		)
	}
	// The ideal counts an unbounded cache over this job's events since each flush; an L3 outlives
	// flushes and jobs, so with one the hits can exceed it, and the summary names it for what it
	// is.
	ideal := "ideal hit %d (%.1f%%, an unbounded cache)"
	if r.L3 != nil {
		ideal = "in-job ideal %d (%.1f%%, an unbounded L1 + L2 since the last flush; the L3 can exceed it)"
	}
	fmt.Fprintf(
		w,
		"  prompt tokens: L1 hit %d (%.1f%%), L2 hit %d (%.1f%%)%s, computed %d (%.1f%%); "+ideal+"\n",
		r.Hits.L1Tokens,
		sharePct(r.Hits.L1Tokens, tokens),
		r.Hits.L2Tokens,
		sharePct(r.Hits.L2Tokens, tokens),
		l3Hits,
		r.Hits.MissTokens,
		sharePct(r.Hits.MissTokens, tokens),
		r.Hits.IdealTokens,
		sharePct(r.Hits.IdealTokens, tokens),
	)
}

// writeBackups prints the L2 backups' fate and L1's evictions and load-backs, with the prompt
// pages L1 could not cache when there were any: the traffic between the tiers.
func (r *Report) writeBackups(w io.Writer) {
	uncached := ""
	if text := r.uncachedText(); text != "" {
		uncached = "; " + text + " (" + r.uncachedWhy() + ")"
	}
	fmt.Fprintf(
		w,
		"  L2 backups: %d reserved, %d committed, %d skipped on a full pool, %d L2 evictions, %d steps throttled; %d L1 evictions, %d load-backs%s\n",
		r.Backup.Reserved,
		r.Backup.Committed,
		r.Backup.ReserveMisses,
		r.Backup.L2Evictions,
		r.Backup.Throttles,
		r.L1.Evictions,
		r.L1.LoadBacks,
		uncached,
	)
}

// writeCopies prints the MiB copied each way between device and host and the flushes, the cost
// the backups and load-backs put on the links.
func (r *Report) writeCopies(w io.Writer) {
	fmt.Fprintf(
		w,
		"  copies: %.1f MiB device-to-host, %.1f MiB host-to-device; %s\n",
		float64(r.Bytes.D2H)/(1<<20),
		float64(r.Bytes.H2D)/(1<<20),
		errscope.Count(r.Flushes, "flush", "flushes"),
	)
}

// writeConsensus prints the step consensus's calls and latency in microseconds, or, in a run of
// one-rank CP groups, that every call was skipped: such a run measured no latency to print.
func (r *Report) writeConsensus(w io.Writer) {
	if r.Consensus.Calls == 0 { // cp 1: every call skipped, so no latency was measured
		fmt.Fprintf(
			w,
			"  step consensus: none (%s skipped: a CP group of one rank has no collective to run)\n",
			errscope.Count(r.Consensus.Skipped, "call", "calls"),
		)
		return
	}
	fmt.Fprintf(w, "  step consensus: %d calls, %.2f per step; latency p50 %.1f us, p99 %.1f us (slowest rank)\n",
		r.Consensus.Calls, r.Consensus.CallsPerStep, r.WritingCheckUs.P50, r.WritingCheckUs.P99)
}

// placementText is the placement line's text: the digest checks, the comparisons' share of the
// wall time and the divergences, or, at cp 1, that the assert was skipped, since a one-rank group
// has no other rank to compare with.
func (r *Report) placementText() string {
	if r.CP == 1 {
		return fmt.Sprintf(
			"assert skipped (cp 1: no other rank to compare with), %d consensus calls skipped",
			r.Placement.Skipped,
		)
	}
	return fmt.Sprintf(
		"%s, object comparisons %.2f%% of the wall time (slowest rank), %s",
		errscope.Count(
			r.Placement.Checks,
			"digest check",
			"digest checks",
		),
		r.PlacementAssertUs.SharePct,
		errscope.Count(r.Placement.Divergences, "divergence", "divergences"),
	)
}

// writeVerify prints the load-back pages checked beside the pages loaded back, and the audits of
// committed objects, shouting when nothing was verified or a load-back went unverified, so that a
// run that checked no data, or only some, cannot pass for one that checked it all.
func (r *Report) writeVerify(w io.Writer) {
	v := r.Verify
	unverified := ""
	if r.Unverified() {
		unverified = fmt.Sprintf(" (%d UNVERIFIED)", v.PagesLoadedBack-v.PagesChecked)
	}
	verify := fmt.Sprintf(
		"%s checked of %d loaded back%s, %s",
		errscope.Count(v.PagesChecked, "load-back page", "load-back pages"),
		v.PagesLoadedBack,
		unverified,
		errscope.Count(v.Mismatches, "mismatch", "mismatches"),
	)
	if v.PagesChecked == 0 && v.PagesLoadedBack == 0 {
		verify = "NOTHING VERIFIED: no page was loaded back from L2"
	}
	audit := "committed objects checked whole (every rank's parts)"
	if r.spansNodes() {
		audit = "audits of committed objects, one on each node of their group (its ranks' parts)"
	}
	fmt.Fprintf(
		w,
		"  verify: %s; audit: %d %s, %d wrong\n",
		verify,
		r.Verify.AuditObjects,
		audit,
		r.Verify.AuditMismatches,
	)
}

// resultText is the summary's last line's text: the verdict and, for a run that failed part-way,
// the check, step and rank that ended it, so that the reader need not search the log for them.
func (r *Report) resultText() string {
	result := r.Verdict()
	switch f := r.Failure; {
	case f != nil && f.Step >= 0:
		result += fmt.Sprintf(
			": %s at step %d, reported by world rank %d (CP group %d, CP rank %d): %s",
			f.Check,
			f.Step,
			f.WorldRank,
			f.CPGroup,
			f.CPRank,
			f.Message,
		)
	case f != nil:
		result += fmt.Sprintf(": %s; %s", f.Check, f.Message)
	case r.Unverified(): // a report the runner did not describe (its own tests, a tool's)
		result += ": " + unverifiedText(r.Verify.PagesLoadedBack, r.Verify.PagesChecked)
	}
	return result
}
