//go:build simbugs

package pool

import "testing"

// TestDigestFieldsCatchMissingStart installs the deliberate bug that leaves each extent's start
// out of the digest (BreakDigestForTest, hicache's digest_misses_start): the perturbation property
// must then find a placement that moved under one digest, and the extent record test must fail.
func TestDigestFieldsCatchMissingStart(t *testing.T) {
	restore := BreakDigestForTest()
	defer restore()
	if _, _, err := perturbedTwins(t, perturbCases[caseExtentStart]); err == nil {
		t.Fatal("a digest without the extents' starts escaped the perturbation property")
	} else {
		t.Logf("caught: %v", err)
	}
	a := mustNew(t, modelGeometries[1])
	if a.chainExtent(1, 1, 3, 5) != a.chainExtent(1, 1, 4, 5) {
		t.Fatal("the bug is installed, the extent record still sees its start")
	}
}
