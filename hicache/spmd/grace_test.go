package spmd

import (
	"testing"
	"time"
)

// TestSilentGraceStretchesWithTheLoad: a silent rank waits SilentRankGrace on a node with cores to
// spare, longer in proportion to the run queue per CPU on a loaded one (where a 2 s wait once ended
// the job before the speaker's message was out), and never past silentGraceMax.
func TestSilentGraceStretchesWithTheLoad(t *testing.T) {
	for _, tc := range []struct {
		loadPerCPU float64
		want       time.Duration
	}{
		{0, SilentRankGrace}, {0.5, SilentRankGrace}, {1, SilentRankGrace},
		{4, 4 * SilentRankGrace}, {9.5, 19 * time.Second}, {25, silentGraceMax}, {1e9, silentGraceMax},
	} {
		if got := silentGrace(tc.loadPerCPU); got != tc.want {
			t.Errorf("load %v a CPU: grace %v, want %v", tc.loadPerCPU, got, tc.want)
		}
	}
	if g := SilentGrace(); g < SilentRankGrace || g > silentGraceMax {
		t.Errorf("this node's grace %v, outside [%v, %v]", g, SilentRankGrace, silentGraceMax)
	}
}
