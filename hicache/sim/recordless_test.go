package sim

import (
	"testing"
)

// TestRecordlessDivergenceIsCaught runs jobs whose one rank leaks an L2 slot behind its digest's
// back (RecordlessDivergence: no record of its own, unlike --inject-divergence's Perturb), and
// requires each to end as the fault says: the group's own checks caught the divergence (the step
// consensus's digest comparison once a placement moved, or the object comparison), or it never
// moved a placement the group holds. It fails on a digest blind to part of a placement (the
// simbugs build's digest_misses_start), and it requires the step consensus to have caught most.
func TestRecordlessDivergenceIsCaught(t *testing.T) {
	const jobs = 300
	var recordless, byDigest, byObjects int
	var lagSum, lagMax int64
	res := Run(Options{
		Seed: 47, Jobs: jobs, Configure: RecordlessDivergence,
		Report: func(jr JobResult) {
			if !jr.Config.Recordless {
				return
			}
			recordless++
			c := jr.Caught
			if c == nil {
				return
			}
			if c.Digests != nil {
				byDigest++
			} else {
				byObjects++
			}
			lag := c.Step - jr.Config.FaultStep
			lagSum, lagMax = lagSum+lag, max(lagMax, lag)
		},
	})
	if res.Violation != nil {
		t.Fatalf("%s\n%s", res.Violation.What, res.Violation.Config)
	}
	caught := byDigest + byObjects
	t.Logf(
		"%d recordless divergences: %d caught by the step consensus's digests, %d by the object "+
			"comparison, %d never moved a held placement; caught %.1f steps after the leak on "+
			"average, at most %d",
		recordless, byDigest, byObjects, recordless-caught,
		float64(lagSum)/float64(max(1, caught)), lagMax,
	)
	if recordless < jobs/2 || byDigest < recordless/2 {
		t.Fatalf("only %d of %d jobs diverged, %d caught by the digests: the test proves little",
			recordless, jobs, byDigest)
	}
}
