//go:build simbugs

package runner

import "github.com/cphicache/cphicache/hicache/cache"

// runnerBugsCompiled says whether this build carries the runner's deliberate bugs: it does.
const runnerBugsCompiled = true

func (b runnerBugs) has(bug runnerBug) bool { return b&runnerBugs(bug) != 0 }

// waitUnbounded is the deliberate bug bugUnboundedLoadWait: it waits for a load wait with no
// watchdog around it, and says it did; false for every other wait, and when the bug is off.
func (rs *runState) waitUnbounded(r cache.WaitReason, done func() bool) bool {
	if !rs.testBugs.has(bugUnboundedLoadWait) || r.Name != loadWaitName {
		return false
	}
	for !done() {
		rs.deliver(true)
	}
	return true
}

// pagesToVerify is the pages of a load-back of n pages that VerifyLoad checks: n, or one fewer
// under the deliberate bug bugVerifySkipsLastPage.
func (rs *runState) pagesToVerify(n int) int {
	if rs.testBugs.has(bugVerifySkipsLastPage) {
		return max(0, n-1)
	}
	return n
}

// auditParts is how many of a node's n parts Audit reads: n, or one fewer under the deliberate bug
// bugAuditSkipsPart.
func (rs *runState) auditParts(n int) int {
	if rs.testBugs.has(bugAuditSkipsPart) {
		return max(0, n-1)
	}
	return n
}

// ownExistenceVotes is, under the deliberate bug bugExistenceOwnView, a copy of this rank's own L3
// existence votes in c (the words after the fixed ones of a step consensus or an l3_prefetch call),
// which the caller puts back after the reduction; nil otherwise.
func (rs *runState) ownExistenceVotes(c *cache.Collective) []uint64 {
	votes := c.Kind == cache.StepConsensus || c.Kind == cache.PrefetchCount
	if !rs.testBugs.has(bugExistenceOwnView) || !votes || len(c.Words) <= cache.VectorWords {
		return nil
	}
	return append([]uint64(nil), c.Words[cache.VectorWords:]...)
}
