//go:build simbugs

package sim

import (
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
)

// bugBudget is how long the simulator may take to catch one deliberate bug (the bound).
const bugBudget = 60 * time.Second

// configureFor gives a bug the jobs that can show it, where drawn jobs cannot. A digest blind to
// part of a placement hides only a divergence that chains no record of its own, and drawn jobs
// inject only --inject-divergence's Perturb, which does (any digest sees it): its jobs perturb the
// allocator's state itself, as TestRecordlessDivergenceIsCaught's do.
var configureFor = map[cache.Bug]func(*JobConfig){
	cache.BugDigestMissesStart: RecordlessDivergence,
}

// modeFor gives the serving clock's bugs its jobs: only serving-clock jobs (ModeServing) price
// steps and replay an ideal.
var modeFor = map[cache.Bug]Mode{
	cache.BugHitChargeIgnoresL1: ModeServing,
	cache.BugL3ReadFree:         ModeServing,
	cache.BugIdealFromMeasured:  ModeServing,
	cache.BugIdealFormsOwnSteps: ModeServing,
	cache.BugBatchFromOwnQueue:  ModeServing,
}

// TestEveryDeliberateBugIsCaught runs the simulator with each deliberate bug of the core (a simbugs
// build) from seed 1 until it reports a violation, and fails for any bug it does not catch within
// bugBudget. Run it with `make sim-bugs`; it logs each bug's time and jobs to catch.
func TestEveryDeliberateBugIsCaught(t *testing.T) {
	for _, bug := range cache.AllBugs() {
		if bug == cache.BugAssertOff {
			// not a bug alone: it only turns a check off (the audit test pairs it with another)
			continue
		}
		t.Run(bug.String(), func(t *testing.T) {
			start := time.Now()
			res := Run(
				Options{
					Seed:      1,
					Bugs:      cache.Bugs(0).With(bug),
					Stop:      func() bool { return time.Since(start) > bugBudget },
					Configure: configureFor[bug],
					Mode:      modeFor[bug],
				},
			)
			if res.Violation == nil {
				t.Fatalf(
					"%s: not caught in %v (%d jobs, %d steps)",
					bug,
					time.Since(start).Round(time.Millisecond),
					res.Jobs,
					res.Steps,
				)
			}
			t.Logf(
				"%s: caught in %v after %d jobs (%d steps): %s",
				bug,
				time.Since(start).Round(time.Millisecond),
				res.Jobs,
				res.Steps,
				res.Violation.What,
			)
		})
	}
}
