//go:build !simbugs

package runner

import "github.com/cphicache/cphicache/hicache/cache"

// runnerBugsCompiled says whether this build carries the runner's deliberate bugs: it does not.
const runnerBugsCompiled = false

func (runnerBugs) has(runnerBug) bool { return false }

// waitUnbounded is constant false without the simbugs tag: every wait is under the watchdog.
func (*runState) waitUnbounded(cache.WaitReason, func() bool) bool { return false }

// pagesToVerify is every page of a load-back without the simbugs tag: VerifyLoad checks them all.
func (*runState) pagesToVerify(n int) int { return n }

// auditParts is every part the audit names without the simbugs tag: Audit reads them all.
func (*runState) auditParts(n int) int { return n }

// ownExistenceVotes is nil without the simbugs tag: the existence votes are reduced with the rest.
func (*runState) ownExistenceVotes(*cache.Collective) []uint64 { return nil }
