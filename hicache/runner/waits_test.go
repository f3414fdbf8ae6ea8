package runner

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// TestALocalWaitInsideAnotherIsABrokenInvariant: the drain slot times one local wait at a time, so
// a wait begun inside another panics, naming both and dumping the runner's state, before it touches
// the watchdog.
func TestALocalWaitInsideAnotherIsABrokenInvariant(t *testing.T) {
	rs := &runState{
		job:     &spmd.Job{Topo: &spmd.Topology{WorldRank: 3, CPGroup: 1, CPRank: 1}},
		waiting: "load-backs",
	}
	var msg string
	func() {
		defer func() { msg, _ = recover().(string) }()
		rs.localWait("copy queue", "", func() bool { return true })
	}()
	for _, want := range []string{"hicache: broken invariant", `"copy queue" began inside the local wait "load-backs"`,
		"world rank 3, CP group 1 rank 1, step 0", "copy tasks queued 0 of 0"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the panic %q does not say %q", msg, want)
		}
	}
}
