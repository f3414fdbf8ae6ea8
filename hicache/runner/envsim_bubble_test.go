package runner

import (
	"flag"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The simulated clock of the runner's Env under simulation (envsim_test.go): each job runs in a
// synctest bubble, so that every time call of the runner's code in it (the watchdog's ticker and
// its armed instants, the read deadlines, deliver's poll interval, the end's read grace, the
// prefetch timing) and of the harness (its bound, the hang's instant, the jitter's sleeps) reads
// and waits on the bubble's fake clock. That clock moves only when every goroutine of the job is
// durably blocked (in a collective's sync.Cond, on a channel, a timer or a sleep), and then
// straight to the next timer: a hang reaches its watchdog at an exact simulated instant, in the
// wall time the polls before it take, however loaded the machine is. What the clock does not fix is
// the order the goroutines run in between two of its moves, which is the Go scheduler's
// (SIMULATOR.md, "Reproducibility").

// synctestDeadlock is how synctest's panic says a bubble cannot go on: every goroutine of it
// blocked with no timer left to fire, or its root returned with goroutines still blocked.
const synctestDeadlock = "deadlock: "

// runEnvSimBubble runs one job (and its warming run) in a bubble of its own, on a clock of its own
// that starts at synctest's epoch. A deadlock of the job's goroutines is the job's violation (its
// seed is named by the caller), not the test binary's crash.
func runEnvSimBubble(t *testing.T, j *envSimJob, bound time.Duration) (res envSimResult) {
	stuck := time.AfterFunc(
		*envSimStuckAfter,
		func() { panic(stuckJob(t.Name(), j)) },
	) // the real clock: made outside the bubble
	defer stuck.Stop()
	err := inBubble(t, func() {
		start := time.Now()
		res = runEnvSim(j, bound)
		res.simulated = time.Since(start)
	})
	if err != nil {
		res.violations = append(
			res.violations,
			fmt.Sprintf(
				"the job's goroutines deadlocked, no timer left to end their wait (synctest: %v)",
				err,
			),
		)
	}
	return res
}

// envSimStuckAfter is how long, on the real clock, a job may run before the test gives up on it:
// one whose goroutines block where synctest cannot see it (a sync.Mutex held by a goroutine blocked
// for good, a syscall) stops its simulated clock, so that neither its bound nor synctest's deadlock
// report ever comes. Its goroutines cannot be ended, so the test binary ends, naming the job; a job
// takes well under a second of wall time.
var envSimStuckAfter = flag.Duration(
	"envsim.stuck-after",
	5*time.Minute,
	"end the test binary when one simulated job has run this long on the real clock",
)

// stuckJob is the message the test binary ends with when a job's simulated clock stopped, with what
// replays it.
func stuckJob(test string, j *envSimJob) string {
	replay := fmt.Sprintf(
		"go test -tags simbugs ./hicache/runner -run '^%s$'",
		test,
	) // the deliberate-bug tests change the jobs they draw
	if test == "TestRunnerEnvUnderSimulation" {
		replay = fmt.Sprintf(
			"go test ./hicache/runner -run '^%s$' -envsim.job-seed %d",
			test,
			j.seed,
		)
	}
	return fmt.Sprintf(
		"%v: still running after %v of wall time: a goroutine of it blocks where its simulated clock cannot move "+
			"(a sync.Mutex held by a goroutine blocked for good, a syscall), so neither its bound nor a deadlock report can end it\nreplay: %s",
		j,
		*envSimStuckAfter,
		replay,
	)
}

// inBubble runs f in a synctest bubble and returns the deadlock synctest found in it, which
// synctest reports by panicking in this goroutine; the goroutines a deadlock leaves blocked stay
// so, the only leak. Any other panic goes on.
func inBubble(t *testing.T, f func()) (deadlock error) {
	defer func() {
		p := recover()
		if p == nil {
			return
		}
		err, ok := p.(error)
		if !ok || !strings.HasPrefix(err.Error(), synctestDeadlock) {
			panic(p)
		}
		deadlock = err
	}()
	synctest.Test(t, func(*testing.T) { f() })
	return nil
}

// TestInBubbleSaysADeadlockAndRunsOnSimulatedTime: a bubble whose goroutines all block, or whose
// root leaves one blocked, is said as an error, and the test goes on; an hour's sleep in a bubble
// takes no wall time.
func TestInBubbleSaysADeadlockAndRunsOnSimulatedTime(t *testing.T) {
	if err := inBubble(t, func() { <-make(chan struct{}) }); err == nil {
		t.Error("a bubble whose root blocked for good was not said to deadlock")
	}
	if err := inBubble(t, func() { go func() { <-make(chan struct{}) }() }); err == nil {
		t.Error("a bubble that left a goroutine blocked for good was not said to deadlock")
	}
	var slept time.Duration
	wallStart := time.Now()
	if err := inBubble(t, func() {
		start := time.Now()
		time.Sleep(time.Hour)
		slept = time.Since(start)
	}); err != nil || slept != time.Hour {
		t.Errorf("an hour's sleep in a bubble: deadlock %v, %v of its clock", err, slept)
	}
	if wall := time.Since(wallStart); wall >= time.Hour {
		t.Errorf("an hour's sleep in a bubble took %v of wall time", wall)
	}
}
