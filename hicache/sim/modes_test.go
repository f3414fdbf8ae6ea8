package sim

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
)

// TestSwarmJobsCoverEveryFeatureAndFaultKind: swarm jobs break no invariant, and over a bounded run
// every feature and every fault kind is on in some jobs, some jobs have no fault and some exactly
// one kind; the report names them all, NEVER for none.
func TestSwarmJobsCoverEveryFeatureAndFaultKind(t *testing.T) {
	res := Run(Options{Seed: 21, Jobs: 200, Mode: ModeSwarm})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	c := res.Swarm
	if c.Jobs != res.Jobs || c.NoFault == 0 || c.OneFault == 0 || c.NoFault+c.OneFault == c.Jobs {
		t.Errorf(
			"swarm jobs %d of %d, %d with no fault, %d with one kind: want some of each and some with more",
			c.Jobs,
			res.Jobs,
			c.NoFault,
			c.OneFault,
		)
	}
	report := strings.Join(res.Swarm.report(), "\n")
	if strings.Contains(report, "NEVER") || !strings.Contains(report, "lagging view") ||
		!strings.Contains(report, "serving steps") {
		t.Errorf("a feature or fault kind is never on, or not reported:\n%s", report)
	}
	// A plain job's configuration is what Draw gives: the modes draw from streams of their own.
	seed := JobSeed(21, 5)
	if plain, drawn := DrawMode(seed, 0, 0, ModePlain), Draw(seed, 0, 0); plain.String() != drawn.String() {
		t.Errorf("the plain mode changed job seed %d's configuration", seed)
	}
	one := DrawMode(JobSeed(21, 5), 0, 0, ModeAll)
	if again := DrawMode(JobSeed(21, 5), 0, 0, one.Mode); again.String() != one.String() {
		t.Errorf(
			"a job of the all mode is not its own mode's job: %s, %s",
			one.String(),
			again.String(),
		)
	}
}

// TestLivenessJobsEndByTheWatchdog: every liveness job whose permanent fault fired (a rank stopped
// forever, an L3 that hangs) ended by the watchdog (exit status 3) within its bound, with a line
// naming every waiting rank's wait (checkLiveness); both faults fire, and a stopped rank is named
// silent, its peers by their waits.
func TestLivenessJobsEndByTheWatchdog(t *testing.T) {
	fired := map[Fault]int{}
	var line string
	res := Run(Options{Seed: 22, Jobs: 120, Mode: ModeLiveness, Report: func(jr JobResult) {
		if jr.Fired {
			fired[jr.Config.Fault]++
			if jr.Config.Fault == FaultStop && jr.Config.CP > 1 && line == "" {
				line = jr.Watchdog
			}
			if jr.Stalled && jr.Outcome.ExitStatus() != 3 {
				t.Errorf(
					"job seed %d: the permanent %s stalled the job and it ended %s",
					jr.Config.Seed,
					jr.Config.Fault,
					jr.Outcome,
				)
			}
		}
	}})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if fired[FaultStop] == 0 || fired[FaultFSHang] == 0 ||
		res.Permanent != fired[FaultStop]+fired[FaultFSHang] ||
		res.Stalled == 0 ||
		res.Outcomes[WatchdogEnd] < res.Stalled {
		t.Errorf(
			"permanent faults fired: %v (the run counted %d, %d stalled), outcomes %v",
			fired,
			res.Permanent,
			res.Stalled,
			res.Outcomes,
		)
	}
	if !strings.Contains(line, "silent (stopped") || !strings.Contains(line, " in the ") {
		t.Errorf("the watchdog's line for a stopped rank: %q", line)
	}
	t.Logf(
		"%d liveness jobs, permanent faults fired %v; a stopped rank's line: %s",
		res.Jobs,
		fired,
		line,
	)
}

// TestLivenessChecksFail: the watchdog's checks can fail. A read that hangs forever with no fault
// to explain it (wait_complete has no deadline) ends the job with a violation naming the wait; a
// job that runs past its tick bound is one that never ends.
func TestLivenessChecksFail(t *testing.T) {
	var hung *Violation
	for i := 0; i < 40 && hung == nil; i++ {
		cfg := Draw(JobSeed(23, i), 0, 0)
		if !cfg.L3.Enabled {
			continue
		}
		cfg.Fault, cfg.L3.PrefetchPolicy = FaultNone, cache.PrefetchWaitComplete
		cfg.L3Faults = L3Faults{SharedAcrossGroups: true, HungReadPerMille: 1000}
		hung = RunJob(cfg).Violation
	}
	if hung == nil || !strings.Contains(hung.What, "the watchdog would end the job") ||
		!strings.Contains(hung.What, "L3 prefetch wait") {
		t.Errorf("a read that hangs forever, no fault injected: %v", hung)
	}
	cfg := Draw(JobSeed(23, 0), 0, 0)
	cfg.Fault = FaultNone
	if steps := RunJob(cfg).Steps; steps < 10 {
		t.Fatalf("job seed %d made %d steps, too few to outrun a bound", cfg.Seed, steps)
	}
	cfg.TickBound = 10
	if v := RunJob(cfg).Violation; v == nil ||
		!strings.Contains(v.What, "did not end within 10 ticks") {
		t.Errorf("a job past its tick bound: %v", v)
	}
}

// TestAPanicIsTheJobsViolation: a panic in the simulator's own machinery (here its model check) is
// reported as the job's violation, with its seed, and the run goes on to report it, not a crash of
// the process.
func TestAPanicIsTheJobsViolation(t *testing.T) {
	cfg := Draw(JobSeed(3, 0), 0, 0)
	cfg.SyncCopies, cfg.L3, cfg.Fault = true, cache.L3Config{}, FaultNone
	res := runJob(cfg, func([]cache.Outcome) { panic("boom") })
	if v := res.Violation; v == nil || v.JobSeed != cfg.Seed ||
		!strings.Contains(v.What, "the simulator panicked") ||
		!strings.Contains(v.What, "boom") {
		t.Errorf("a panic in the model check: %v", v)
	}
}
