//go:build !simbugs

package cache

// BugsCompiled says whether this build carries the deliberate bugs (the simbugs build tag): it does
// not.
const BugsCompiled = false

// has is constant false without the simbugs tag, so every deliberate bug's branch is dead code.
func (Bugs) has(Bug) bool { return false }
