//go:build simbugs

package runner

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
)

// envBugBound is the bound of a job in the deliberate-bug test, on its simulated clock: long past
// the watchdog's (envHangTimeout plus its collective grace), short enough that the one-rank job the
// bug hangs polls for it only 80,000 times (drainPollInterval).
const envBugBound = 4 * time.Second

// TestRunnerHarnessCatchesAnUnboundedLoadWait: with the deliberate bug bugUnboundedLoadWait (the
// runner's load wait polls with no watchdog around it, as a mutation of Wait once did), a load-back
// copy that never completes must fail the runner-under-simulation's checks by their bound, not hang
// the test: at CP 1 nothing else waits, so only the harness's bound ends the job; at CP 2 or more a
// peer's watchdog ends it, naming its collective instead of the wait that hung. The same jobs
// without the bug pass, so the check is the bug's and not noise.
func TestRunnerHarnessCatchesAnUnboundedLoadWait(t *testing.T) {
	skipUnderMPIRun(t)
	caught := map[bool]bool{} // by whether the job's group has one rank
	for seed := uint64(1); seed < 400 && (!caught[true] || !caught[false]); seed++ {
		j := drawEnvSimJob(seed)
		oneRank := j.cp == 1
		if caught[oneRank] {
			continue
		}
		j.fault, j.faultAt, j.opts.InjectCopyError = envFaultStuckLoad, 1, config.Injection{}
		j.opts.WatchdogTimeout = envHangTimeout
		buggy, ok := runWithBug(
			t,
			j,
			bugUnboundedLoadWait,
			"unbounded_load_wait",
			func(clean envSimResult) bool {
				return clean.faultFired
			},
		)
		if !ok {
			continue // no load-back on that rank in one of the runs: the wait under test never ran
		}
		t.Logf(
			"cp %d: caught at %v of simulated time (%.2f s wall): %s",
			j.cp,
			buggy.simulated,
			buggy.wall.Seconds(),
			buggy.violations[0],
		)
		caught[oneRank] = true
	}
	if !caught[true] || !caught[false] {
		t.Fatalf(
			"no job of seeds 1 to 399 hung a load-back at CP 1 and at CP 2 or more (caught: %v)",
			caught,
		)
	}
}

// TestRunnerHarnessCatchesAMissingReadDeadline: with the deliberate bug bugNoReadDeadline (no L3
// read is given up at a deadline, as a mutation of readDeadline once did), a read that hangs under
// the timeout or best_effort policy holds the wait that drains it (the step's prefetch wait, or a
// flush's or the end's L3 drain) until a watchdog ends the job, which the checks refuse: under
// those policies no watchdog may fire. The same jobs without the bug give the read up at its
// deadline and pass.
func TestRunnerHarnessCatchesAMissingReadDeadline(t *testing.T) {
	skipUnderMPIRun(t)
	caught := map[cache.PrefetchPolicy]bool{}
	policies := []cache.PrefetchPolicy{cache.PrefetchTimeout, cache.PrefetchBestEffort}
	for seed := uint64(1); seed < 400 && len(caught) < len(policies); seed++ {
		j := drawEnvSimJob(seed)
		policy := j.opts.L3.PrefetchPolicy
		if j.fault != envFaultHungRead || !slices.Contains(policies, policy) || caught[policy] {
			continue
		}
		buggy, ok := runWithBug(
			t,
			j,
			bugNoReadDeadline,
			"no_read_deadline",
			func(clean envSimResult) bool {
				return clean.faultFired && clean.readsGivenUp > 0
			},
		)
		if !ok {
			continue // no read hung (in either run), or none was left for a wait to give up
		}
		t.Logf(
			"%v: caught at %v of simulated time (%.2f s wall): %s",
			policy,
			buggy.simulated,
			buggy.wall.Seconds(),
			buggy.violations[0],
		)
		caught[policy] = true
	}
	if len(caught) < len(policies) {
		t.Fatalf(
			"no job of seeds 1 to 399 gave a hung read up at its deadline under each of %v (caught: %v)",
			policies,
			caught,
		)
	}
}

// TestRunnerHarnessCatchesAnUnverifiedLoadBack: with the deliberate bug bugVerifySkipsLastPage
// (VerifyLoad leaves a load-back's last page unchecked and uncounted), no byte is wrong, so only
// coverage shows it: the harness's check that every page a rank loaded back was verified. The first
// job without a fault that loads back passes without the bug and fails that check with it.
func TestRunnerHarnessCatchesAnUnverifiedLoadBack(t *testing.T) {
	skipUnderMPIRun(t)
	for seed := uint64(1); seed < 400; seed++ {
		j := drawEnvSimJob(seed)
		if j.fault != envFaultNone {
			continue // a fault's own ending is another test's: this one wants the job whole
		}
		clean := runEnvSimBubble(t, j, envBugBound)
		if clean.loadBacks == 0 {
			continue // nothing loaded back: nothing for the bug to skip
		}
		requireClean(t, j, clean)
		j.bugs = j.bugs.with(bugVerifySkipsLastPage)
		start := time.Now()
		buggy := runEnvSimBubble(t, j, envBugBound)
		coverage := slices.IndexFunc(buggy.violations, func(v string) bool {
			return strings.HasPrefix(v, "coverage: ") && strings.Contains(v, "loaded back")
		})
		if coverage < 0 {
			t.Fatalf("%v with verify_skips_last_page: no coverage check failed: %v", j, buggy.violations)
		}
		t.Logf(
			"caught at %v of simulated time (%.2f s wall): %s",
			buggy.simulated,
			time.Since(start).Seconds(),
			buggy.violations[coverage],
		)
		return
	}
	t.Fatal("no job of seeds 1 to 399 without a fault loaded a page back")
}

// buggyRun is a job's run with a deliberate bug, and the wall time it took.
type buggyRun struct {
	envSimResult
	wall time.Duration
}

// runWithBug runs j without and then with bug (named name), on the simulated clock. ok is false
// when the pair is no evidence either way: the clean run is not one the bug can show in (shows), or
// the buggy run's fault did not fire. Between two moves of the clock goroutine order is the
// scheduler's, so the copies of the buggy run can race the fault away (seed 54 in CI; 2 runs in 40
// here). The test fails when the clean run fails a check (requireClean) or the buggy run whose
// fault fired fails none.
func runWithBug(
	t *testing.T,
	j *envSimJob,
	bug runnerBug,
	name string,
	shows func(clean envSimResult) bool,
) (buggyRun, bool) {
	t.Helper()
	clean := runEnvSimBubble(t, j, envBugBound)
	if !shows(clean) {
		return buggyRun{}, false
	}
	requireClean(t, j, clean)
	j.bugs = j.bugs.with(bug)
	start := time.Now()
	buggy := buggyRun{envSimResult: runEnvSimBubble(t, j, envBugBound)}
	buggy.wall = time.Since(start)
	if !buggy.faultFired {
		return buggyRun{}, false
	}
	if len(buggy.violations) == 0 {
		t.Fatalf("%v with %s: no check failed", j, name)
	}
	return buggy, true
}

// requireClean fails the test when the job without the bug failed a check: a job is only the bug's
// evidence when it passes without it. On the simulated clock no bound or watchdog of the job
// depends on the machine's load, so a clean job that fails is a failure of the runner or of its
// harness, not noise (until the clock was simulated, a loaded node missed a real-clock bound now
// and then, and the next seed was tried instead).
func requireClean(t *testing.T, j *envSimJob, clean envSimResult) {
	t.Helper()
	if len(clean.violations) > 0 {
		t.Fatalf(
			"%v without the bug:\n  %s\n  replay: go test -tags simbugs ./hicache/runner -run '^%s$' (it draws seeds 1, 2, ... in order)",
			j,
			strings.Join(clean.violations, "\n  "),
			t.Name(),
		)
	}
}

// envBugsCaught are the deliberate bugs the harness must catch in the jobs it draws, as a run of
// `make sim-runner` draws them: the runner's own (runbugs.go), and the core's that the core's
// simulator catches and that the harness did not until its models (envsim_env_test.go): an audit
// that names a part fewer, existence votes agreed by the MAX or not agreed at all, and write_back
// writes at commit or for the oldest object only.
var envBugsCaught = []string{
	"unbounded_load_wait", "no_read_deadline", "verify_skips_last_page", "audit_skips_part",
	"existence_own_view",
	"audit_skips_rank", "existence_vote_max", "local_prefetch_count", "write_back_at_commit",
	"write_back_oldest_only",
}

// envBugJobs is how many drawn jobs a deliberate bug may take to be caught.
const envBugJobs = 500

// TestRunnerHarnessCatchesEachBugInDrawnJobs: each deliberate bug of envBugsCaught, set in every
// job the default run draws (-envsim.seed), is caught within envBugJobs jobs, and the job that
// caught it passes without it, so that the check is the bug's and not noise. It logs, for each,
// the check that caught it (the first violation), after how many jobs, and how long it took:
// the time `make sim-runner` with the bug takes to report it, since a violation ends the run.
func TestRunnerHarnessCatchesEachBugInDrawnJobs(t *testing.T) {
	skipUnderMPIRun(t)
	for _, name := range envBugsCaught {
		bugs, err := parseEnvSimBugs(name)
		if err != nil {
			t.Fatal(err)
		}
		seeds := rand.New(rand.NewPCG(*envSimSeed, 0x5eed)) // as envSimJobSeeds draws them
		start, caught := time.Now(), false
		for n := 1; n <= envBugJobs && !caught; n++ {
			j := drawEnvSimJob(seeds.Uint64())
			bugs.set(j)
			buggy := runEnvSimBubble(t, j, envBugBound)
			if len(buggy.violations) == 0 {
				continue
			}
			wall := time.Since(start)
			clean := drawEnvSimJob(j.seed)
			requireClean(t, clean, runEnvSimBubble(t, clean, envBugBound))
			t.Logf(
				"%s: caught in job %d (seed %d), %.2f s wall, at %v of its clock: %s",
				name, n, j.seed, wall.Seconds(), buggy.simulated.Round(time.Microsecond),
				buggy.violations[0],
			)
			caught = true
		}
		if !caught {
			t.Errorf("%s: no check failed in %d jobs drawn from seed %d", name, envBugJobs, *envSimSeed)
		}
	}
}
