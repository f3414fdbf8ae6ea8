//go:build simbugs

package hicache

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
)

// envBugBound is the bound of a job in the deliberate-bug test: long past the watchdog's (envHangTimeout plus
// its collective grace), short enough that the one-rank job the bug hangs costs a few seconds.
const envBugBound = 4 * time.Second

// TestRunnerHarnessCatchesAnUnboundedLoadWait: with the deliberate bug bugUnboundedLoadWait (the runner's load
// wait polls with no watchdog around it, as a mutation of Wait once did), a load-back copy that never completes
// must fail the runner-under-simulation's checks by their bound, not hang the test: at CP 1 nothing else waits,
// so only the harness's bound ends the job; at CP 2 or more a peer's watchdog ends it, naming its collective
// instead of the wait that hung. The same jobs without the bug pass, so the check is the bug's and not noise.
func TestRunnerHarnessCatchesAnUnboundedLoadWait(t *testing.T) {
	skipUnderMPIRun(t)
	caught := map[bool]bool{} // by whether the job's group has one rank
	var noisy []string
	for seed := uint64(1); seed < 400 && (!caught[true] || !caught[false]); seed++ {
		j := drawEnvSimJob(seed)
		oneRank := j.cp == 1
		if caught[oneRank] {
			continue
		}
		j.fault, j.faultAt, j.opts.InjectCopyError = envFaultStuckLoad, 1, Injection{}
		j.opts.WatchdogTimeout = envHangTimeout
		clean := runEnvSim(j, envBugBound)
		if !clean.faultFired {
			continue // no load-back on that rank: the wait under test never ran
		}
		if cleanFailed(t, j, clean, &noisy) {
			continue
		}
		j.bugs = j.bugs.with(bugUnboundedLoadWait)
		start := time.Now()
		buggy := runEnvSim(j, envBugBound)
		if len(buggy.violations) == 0 {
			t.Fatalf("%v with %s: no check failed", j, "unbounded_load_wait")
		}
		t.Logf("cp %d: caught in %.1f s: %s", j.cp, time.Since(start).Seconds(), buggy.violations[0])
		caught[oneRank] = true
	}
	if !caught[true] || !caught[false] {
		t.Fatalf("no job of seeds 1 to 399 hung a load-back at CP 1 and at CP 2 or more (caught: %v)%s", caught, strings.Join(noisy, ""))
	}
}

// TestRunnerHarnessCatchesAMissingReadDeadline: with the deliberate bug bugNoReadDeadline (no L3 read is given
// up at a deadline, as a mutation of readDeadline once did), a read that hangs under the timeout or best_effort
// policy holds the wait that drains it (the step's prefetch wait, or a flush's or the end's L3 drain) until a
// watchdog ends the job, which the checks refuse: under those policies no watchdog may fire. The same jobs
// without the bug give the read up at its deadline and pass.
func TestRunnerHarnessCatchesAMissingReadDeadline(t *testing.T) {
	skipUnderMPIRun(t)
	caught := map[cache.PrefetchPolicy]bool{}
	var noisy []string
	policies := []cache.PrefetchPolicy{cache.PrefetchTimeout, cache.PrefetchBestEffort}
	for seed := uint64(1); seed < 400 && len(caught) < len(policies); seed++ {
		j := drawEnvSimJob(seed)
		policy := j.opts.L3.PrefetchPolicy
		if j.fault != envFaultHungRead || !slices.Contains(policies, policy) || caught[policy] {
			continue
		}
		clean := runEnvSim(j, envBugBound)
		if !clean.faultFired || clean.readsGivenUp == 0 {
			continue // no read hung, or none was left for a wait to give up
		}
		if cleanFailed(t, j, clean, &noisy) {
			continue
		}
		j.bugs = j.bugs.with(bugNoReadDeadline)
		start := time.Now()
		buggy := runEnvSim(j, envBugBound)
		if len(buggy.violations) == 0 {
			t.Fatalf("%v with %s: no check failed", j, "no_read_deadline")
		}
		t.Logf("%v: caught in %.1f s: %s", policy, time.Since(start).Seconds(), buggy.violations[0])
		caught[policy] = true
	}
	if len(caught) < len(policies) {
		t.Fatalf("no job of seeds 1 to 399 gave a hung read up at its deadline under each of %v (caught: %v)%s", policies, caught, strings.Join(noisy, ""))
	}
}

// cleanFailed says whether a job without the bug failed a check, noting it in noisy: a job is only the bug's
// evidence when it passes without it. The harness runs on the real clock (its watchdog 1 s), so on a node loaded
// far beyond its cores a job may miss a bound now and then; the next seed is tried instead, and the test fails
// only if no seed is left, quoting what the clean jobs said (TestRunnerEnvUnderSimulation is the one that holds
// clean jobs to their checks).
func cleanFailed(t *testing.T, j *envSimJob, clean envSimResult, noisy *[]string) bool {
	if len(clean.violations) == 0 {
		return false
	}
	line := fmt.Sprintf("\n%v without the bug: %s", j, strings.Join(clean.violations, "; "))
	t.Log(line)
	*noisy = append(*noisy, line)
	return true
}
