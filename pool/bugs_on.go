//go:build simbugs

package pool

import "sync/atomic"

// digestDropsStart is the deliberate bug that BreakDigestForTest installs (simbugs builds only).
var digestDropsStart atomic.Bool

func digestSkipsExtentStart() bool { return digestDropsStart.Load() }

// BreakDigestForTest is FOR THE SIMULATOR'S DELIBERATE BUGS ONLY (hicache/cache's
// BugDigestMissesField): until the returned restore function is called, every allocator of the
// process leaves each extent's first slot out of the digest, a digest blind to part of a placement.
// A rank whose placement starts elsewhere with the same lengths then looks in step. Only a simbugs
// build carries it; elsewhere it installs nothing (bugs_off.go).
func BreakDigestForTest() (restore func()) {
	digestDropsStart.Store(true)
	return func() { digestDropsStart.Store(false) }
}

func (a *Allocator) hasPolicyBug(bug PolicyBug) bool { return a.policyBug == bug }

// BreakPolicyForTest is FOR THE SIMULATOR'S DELIBERATE BUGS ONLY (hicache/cache's policy bugs): it
// installs one deliberate bug of a policy in this allocator alone, so that the core can give it to
// one rank of a group, as a rank that broke the policy's determinism would. Reset keeps it. Only a
// simbugs build carries it; elsewhere it installs nothing (bugs_off.go).
func (a *Allocator) BreakPolicyForTest(bug PolicyBug) { a.policyBug = bug }
