//go:build simbugs

package cache

// BugsCompiled says whether this build carries the deliberate bugs (the simbugs build tag): it
// does.
const BugsCompiled = true

func (b Bugs) has(bug Bug) bool { return b&Bugs(bug) != 0 }
