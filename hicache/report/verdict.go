package report

import (
	"fmt"
	"strings"

	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The run's verdict: FAILED on anything wrong, else OK, with "but ..." for what the run did not
// cover (a check that could not run) or what went wrong without changing any data (pages L1 could
// not hold, L3 trouble), so that a plain OK means the whole configuration was exercised as given.

// Verdict is the summary's last word: FAILED on anything wrong (Failed), and an OK that says what
// it does not cover when a check could not run, and what went wrong without changing data
// (caveats).
func (r *Report) Verdict() string {
	if r.Failed() {
		return "FAILED"
	}
	var unchecked []string
	if r.CP == 1 {
		unchecked = append(unchecked, "placement not compared (cp 1)")
	}
	if r.Verify.PagesChecked == 0 {
		unchecked = append(unchecked, "no data verified (0 load-backs)")
	}
	said := strings.Join(unchecked, " and ")
	for _, caveat := range r.caveats() {
		said = strings.TrimPrefix(said+"; "+caveat, "; ")
	}
	if said == "" {
		return "OK"
	}
	return "OK, but " + said
}

// NotCovered is nil for a plain OK or a failure (which RunFailure returns), and a
// *errscope.NotCoveredError naming what the run did not cover for an "OK, but ..." (--strict).
func (r *Report) NotCovered() error {
	if v := r.Verdict(); strings.HasPrefix(v, "OK, but ") {
		return &errscope.NotCoveredError{What: strings.TrimPrefix(v, "OK, but ")}
	}
	return nil
}

// caveats are what went wrong without changing any data: prompt pages L1 could not hold (a request
// longer than L1 is computed but not cached), and L3 blocks that failed to write or did not fit its
// budget at all.
func (r *Report) caveats() []string {
	var said []string
	if n := r.L1.UncachedOversizePages; n > 0 {
		said = append(
			said,
			fmt.Sprintf(
				"%d pages (%.1f%%) not cached: a request needs more L1 than --device-pages gives",
				n,
				r.pagePct(n),
			),
		)
	}
	if l3 := r.L3; l3 != nil {
		if l3.WriteErrors > 0 {
			said = append(
				said,
				fmt.Sprintf(
					"%d L3 block writes failed (the blocks were dropped; see the first error logged)",
					l3.WriteErrors,
				),
			)
		}
		// --l3-bytes counts the model's KV when a model is given, else the block files' bytes
		perToken := r.Capacity.CopiedTokenBytes
		if r.Capacity.Model != "" {
			perToken = r.Capacity.TokenBytes
		}
		if blockBytes := int64(l3.BlockTokens) * perToken; l3.Bytes < blockBytes {
			said = append(
				said,
				fmt.Sprintf(
					"--l3-bytes %d is smaller than one block (%s): every block written was evicted (%d)",
					l3.Bytes,
					sizing.FormatBytes(blockBytes),
					l3.Evictions,
				),
			)
		}
		if l3.Corrupt > 0 {
			said = append(
				said,
				fmt.Sprintf("%d corrupt L3 blocks found (removed, never served)", l3.Corrupt),
			)
		}
	}
	return said
}

// uncachedText is "N pages (P%) not cached", or empty when every page was cached.
func (r *Report) uncachedText() string {
	n, pct := r.Uncached()
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d pages (%.1f%%) not cached", n, pct)
}

// Uncached is the prompt pages computed but not cached, because L1 could not hold them beside the
// rest of their request, and their percentage of every prompt page.
func (r *Report) Uncached() (pages int64, pct float64) {
	return r.L1.UncachedPages, r.pagePct(r.L1.UncachedPages)
}

// pagePct is pages as a percentage of every prompt page.
func (r *Report) pagePct(pages int64) float64 {
	promptTokens := r.Hits.L1Tokens + r.Hits.L2Tokens + r.Hits.L3Tokens + r.Hits.MissTokens
	if c := r.Capacity; c.DevicePages > 0 && c.DeviceTokens > 0 {
		if promptPages := promptTokens / (c.DeviceTokens / int64(c.DevicePages)); promptPages > 0 {
			return 100 * float64(pages) / float64(promptPages)
		}
	}
	return 0
}

// uncachedWhy says why pages went uncached: requests longer than L1 (a configuration that caches
// them never), or an L1 whose pages were all in use by the step or pinned by copies when a request
// needed them (a capacity effect, like an L2 miss: not a caveat of the result).
func (r *Report) uncachedWhy() string {
	if n := r.L1.UncachedOversizePages; n > 0 {
		return fmt.Sprintf("%d of them of requests longer than L1", n)
	}
	return "L1 had no page to spare: its pages were in use or being copied"
}

// RunFailed ends a run whose report counts anything wrong (Failed). The report is aggregated over
// every rank, so every rank returns the same one and it is printed once.
type RunFailed struct {
	Divergences, Mismatches, AuditMismatches, CopyErrors, L3BlockMismatches int64
	// the pages loaded back and those verified: said only when they differ (an unverified
	// load-back), so that every other failure keeps its words
	PagesLoadedBack, PagesChecked int64
}

func (e *RunFailed) Error() string {
	msg := fmt.Sprintf(
		"run failed: %d placement divergences, %d load-back mismatches, %d audited objects wrong, %d copy errors, %d L3 blocks refused with wrong bytes",
		e.Divergences,
		e.Mismatches,
		e.AuditMismatches,
		e.CopyErrors,
		e.L3BlockMismatches,
	)
	if e.PagesLoadedBack != e.PagesChecked {
		msg += ", " + unverifiedText(e.PagesLoadedBack, e.PagesChecked)
	}
	return msg
}

// UnverifiedCheck names the check that fails a run whose pages loaded back and pages verified
// differ: a load-back released without its byte-for-byte check has right bytes as often as not, so
// no mismatch shows it and only the two counts side by side can.
const UnverifiedCheck = "unverified load-back"

// unverifiedText says the pages loaded back and those verified, for a run in which they differ.
func unverifiedText(loadedBack, checked int64) string {
	return fmt.Sprintf(
		"%s: %d pages loaded back, %d verified",
		UnverifiedCheck,
		loadedBack,
		checked,
	)
}

// Unverified reports whether the pages loaded back and the pages verified differ: every page
// loaded back must be verified, once.
func (r *Report) Unverified() bool { return r.Verify.PagesLoadedBack != r.Verify.PagesChecked }

// FailOutput records that an output of the run could not be written (a full disk under --timeline,
// --report or --metrics-file): the job exits non-zero, so the report and the summary written after
// it must not say OK. A run that failed already keeps its own failure, which is the one to tell.
func (r *Report) FailOutput(err error) {
	if r.Failure == nil {
		r.Failure = &FailureReport{Check: "output", Step: -1, WorldRank: 0, Message: err.Error()}
	}
}

// RunFailure is the RunFailed the report's counts say, or nil.
func (r *Report) RunFailure() error {
	if !r.Failed() {
		return nil
	}
	f := &RunFailed{
		Divergences:     r.Placement.Divergences,
		Mismatches:      r.Verify.Mismatches,
		AuditMismatches: r.Verify.AuditMismatches,
		CopyErrors:      r.Verify.CopyErrors,
		PagesLoadedBack: r.Verify.PagesLoadedBack,
		PagesChecked:    r.Verify.PagesChecked,
	}
	if r.L3 != nil {
		f.L3BlockMismatches = r.L3.WriteMismatches
	}
	return f
}

// Scope: the report is aggregated over the whole job, so every rank fails alike.
func (e *RunFailed) Scope() errscope.Scope { return errscope.JobScope }

// Failed reports whether the run saw anything wrong: a divergence, a wrong byte in a load-back or
// an audit, a copy that failed, or a load-back left unverified (Unverified).
func (r *Report) Failed() bool {
	return r.Failure != nil || r.Placement.Divergences != 0 || r.Verify.Mismatches != 0 ||
		r.Verify.AuditMismatches != 0 ||
		r.Verify.CopyErrors != 0 ||
		r.Unverified() ||
		(r.L3 != nil && r.L3.WriteMismatches != 0)
}
