package cli

import (
	"strings"
	"testing"
	"time"
)

// TestInjectedSetupErrorEndsEveryRankWithOneMessage: one rank's copy-engine set-up fails; the job
// ends at once, every rank exits non-zero, and the failing rank's message is printed once.
func TestInjectedSetupErrorEndsEveryRankWithOneMessage(t *testing.T) {
	besideOthers(t)
	start := time.Now()
	res := runMPI(t, 4, 60*time.Second, "run", "--quiet", "--inject-setup-error", "2")
	// The silent ranks wait a moment before exiting, so that the speaker's line gets out; mpirun
	// may end them first with SIGTERM, which rank 0 reports: that line says how the job ended, not
	// why.
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(cphicacheLines(res.stderr)), "\n") {
		if !strings.Contains(line, "received SIGTERM") {
			lines = append(lines, line)
		}
	}
	if res.exitCode == 0 || len(lines) != 1 || !strings.Contains(lines[0], "rank 2") ||
		!strings.Contains(
			lines[0],
			"injected set-up failure on world rank 2 (--inject-setup-error)",
		) {
		t.Fatalf(
			"exit %d, want non-zero and one line from rank 2 naming the failure; stderr:\n%s",
			res.exitCode,
			res.stderr,
		)
	}
	// No watchdog wait: the agreement ends the job as soon as every rank has tried. (Half the
	// default watchdog timeout, 120 s, which a job that waited for it could not meet; a loaded
	// machine can.)
	if elapsed := time.Since(start); elapsed > 60*time.Second {
		t.Errorf("the job took %v to end", elapsed)
	}
	checkNoSegments(t)
}
