package cli

import (
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A rank ended by a signal while it waits (as the launcher ends the ranks that waited for one whose
// watchdog fired, or scancel a hung job) says in what and for how long, so that the job's last
// lines name what each rank was doing: rank 1 hangs at step 5, rank 0 waits for it in the step
// consensus until both get SIGTERM.
func TestARankEndedWhileItWaitsSaysWhere(t *testing.T) {
	besideOthers(t)
	res, _ := runMPIOnMarker(t, 2, 60*time.Second, "injected hang at step 5", func(cmd *exec.Cmd) {
		go func() {
			// Rank 0 must have waited a second (waitWorthSaying) when the signal comes: it enters
			// the consensus a step's work after rank 1 hangs, which a loaded machine stretches, so
			// 5 s and not 1.
			time.Sleep(5 * time.Second)
			for _, pid := range childPids(t, cmd.Process.Pid) {
				syscall.Kill(pid, syscall.SIGTERM)
			}
		}()
	}, "run", "--quiet", "--watchdog-timeout", "60s", "--inject-hang", "1@5")
	line := lineWith(res.stderr, "rank 0: received SIGTERM while waiting")
	if res.exitCode == 0 ||
		!strings.Contains(
			line,
			" s in step consensus on CP group 0 (2 ranks) at step 5; run abandoned",
		) {
		t.Errorf(
			"exit %d, rank 0 said %q: want where it waited:\n%s",
			res.exitCode,
			line,
			res.stderr,
		)
	}
	checkNoSegments(t)
}
