//go:build !simbugs

package pool

// digestSkipsExtentStart is constant false without the simbugs tag, so the digest's deliberate bug
// is dead code and place costs what it did.
func digestSkipsExtentStart() bool { return false }

// BreakDigestForTest installs nothing without the simbugs tag (bugs_on.go carries the bug).
func BreakDigestForTest() (restore func()) { return func() {} }

// hasPolicyBug is constant false without the simbugs tag, so the policies' deliberate bugs are dead
// code.
func (*Allocator) hasPolicyBug(PolicyBug) bool { return false }

// BreakPolicyForTest installs nothing without the simbugs tag (bugs_on.go carries the bugs).
func (*Allocator) BreakPolicyForTest(PolicyBug) {}
