package runner

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The runner's Env under simulation as a test: seeded jobs (envsim_test.go), each checked at its
// end; a violation names its job seed and the command that runs it again. `make sim-runner` runs it
// longer.

var (
	envSimSeed = flag.Uint64(
		"envsim.seed",
		20261202,
		"the runner-under-simulation run's seed: it draws the job seeds",
	)
	envSimJobs = flag.Int(
		"envsim.jobs",
		40,
		"how many jobs the runner-under-simulation test runs (see -envsim.seconds)",
	)
	envSimSeconds = flag.Float64(
		"envsim.seconds",
		0,
		"run jobs for this long instead of -envsim.jobs",
	)
	envSimJobSeed = flag.Uint64(
		"envsim.job-seed",
		0,
		"run only this job (a seed a violation named)",
	)
	envSimBug = flag.String(
		"envsim.bug",
		"",
		"run every job with these deliberate bugs, comma-separated (the runner's or the core's; -tags simbugs)",
	)
)

// TestRunnerEnvUnderSimulation runs seeded jobs of the real runner's Env (its waits under its
// watchdog, its copy worker, its L3 goroutines and store, its audit) over a simulated MPI and
// filesystem, with one fault each, and fails on the first job whose checks do not hold: the run
// ends there, with the job's seed, how many jobs and how long it took, and the command that runs
// the job again. It also fails when the jobs never reached what they exist to exercise (a hang the
// watchdog ended, a copy error, load-backs, audits, L3 reads and writes), so a change that stops
// them reaching it shows. -envsim.bug runs every job with deliberate bugs (a simbugs build's).
func TestRunnerEnvUnderSimulation(t *testing.T) {
	skipUnderMPIRun(t)
	bugs, err := parseEnvSimBugs(*envSimBug)
	if err != nil {
		t.Fatal(err)
	}
	seeds := envSimJobSeeds()
	var tally envSimTally
	start := time.Now()
	for i := 0; ; i++ {
		if *envSimSeconds > 0 && time.Since(start).Seconds() >= *envSimSeconds ||
			*envSimSeconds <= 0 && i >= len(seeds) {
			break
		}
		j := drawEnvSimJob(seeds[i%len(seeds)])
		if *envSimSeconds > 0 && i >= len(seeds) {
			j = drawEnvSimJob(
				rand.Uint64(),
			) // past the seeded list: fresh seeds, each named on a violation
		}
		bugs.set(j)
		res := runEnvSimBubble(t, j, envSimBound)
		tally.add(j, res)
		if len(res.violations) > 0 {
			t.Errorf(
				"%v:\n  %s\n  the run stops at the first violation: job %d, after %.2f s\n  replay: %s",
				j,
				strings.Join(res.violations, "\n  "),
				tally.jobs,
				time.Since(start).Seconds(),
				bugs.replay(j.seed),
			)
			break
		}
	}
	t.Logf(
		"%d jobs in %.1f s (%.3f s of their simulated clocks): %s",
		tally.jobs,
		time.Since(start).Seconds(),
		tally.simulated.Seconds(),
		tally,
	)
	if *envSimJobSeed == 0 && !t.Failed() {
		if missed := tally.missed(); missed != "" {
			t.Errorf("the jobs never reached: %s (the run proves less than it says)", missed)
		}
	}
}

// envSimBugs are the deliberate bugs every job of a run carries (-envsim.bug): the runner's, and
// the core's run through the runner.
type envSimBugs struct {
	names  string
	runner runnerBugs
	core   cache.Bugs
}

// parseEnvSimBugs reads a comma-separated list of the runner's (runbugs.go) and the core's
// (cache.Bug) deliberate bugs; a build without the simbugs tag carries none.
func parseEnvSimBugs(names string) (envSimBugs, error) {
	b := envSimBugs{names: names}
	for name := range strings.SplitSeq(names, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !runnerBugsCompiled || !cache.BugsCompiled {
			return b, fmt.Errorf("-envsim.bug %s: the deliberate bugs need -tags simbugs", name)
		}
		if bug, ok := runnerBugByName(name); ok {
			b.runner = b.runner.with(bug)
			continue
		}
		bug, err := cache.ParseBug(name)
		if err != nil {
			return b, fmt.Errorf("-envsim.bug: not a bug of the runner's (%s) or the core's: %w",
				strings.Join(slices.Sorted(maps.Values(runnerBugNames)), ", "), err)
		}
		b.core = b.core.With(bug)
	}
	return b, nil
}

func runnerBugByName(name string) (runnerBug, bool) {
	for bug, n := range runnerBugNames {
		if n == name {
			return bug, true
		}
	}
	return 0, false
}

// set gives j the bugs.
func (b envSimBugs) set(j *envSimJob) {
	j.bugs, j.testing.Core.Bugs = j.bugs|b.runner, j.testing.Core.Bugs|b.core
}

// replay is the command that runs job seed again, with the bugs.
func (b envSimBugs) replay(seed uint64) string {
	if b.names == "" {
		return fmt.Sprintf(
			"go test ./hicache/runner -run '^TestRunnerEnvUnderSimulation$' -envsim.job-seed %d",
			seed,
		)
	}
	return fmt.Sprintf(
		"go test -tags simbugs ./hicache/runner -run '^TestRunnerEnvUnderSimulation$' -envsim.job-seed %d -envsim.bug %s",
		seed,
		b.names,
	)
}

// skipUnderMPIRun skips a test of the runner under simulation in a launch by mpirun: the harness is
// a whole job in one process, which the plain `go test` launch runs (make test-unit, make
// sim-bugs); make test-mpi's launches of the SPMD binary, one rank or many, would only run it
// again.
func skipUnderMPIRun(t *testing.T) {
	for _, name := range []string{"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"} {
		if _, ok := os.LookupEnv(name); ok || testWorld.Size() > 1 {
			t.Skip("the runner under simulation runs in the plain go test launch, not under mpirun")
		}
	}
}

// envSimJobSeeds are the job seeds of a run: the one -envsim.job-seed names, or -envsim.jobs drawn
// from -envsim.seed.
func envSimJobSeeds() []uint64 {
	if *envSimJobSeed != 0 {
		return []uint64{*envSimJobSeed}
	}
	rng := rand.New(rand.NewPCG(*envSimSeed, 0x5eed))
	seeds := make([]uint64, max(1, *envSimJobs))
	for i := range seeds {
		seeds[i] = rng.Uint64()
	}
	return seeds
}

// envSimTally counts what a run's jobs reached.
type envSimTally struct {
	jobs, hangsEnded, copyErrors, l3Faults, failed int
	loadBacks, audits, reads, wrote, readsGivenUp  int64
	auditProbes, hidden, writeBacks, splitReads    int64
	// the waits the watchdogs named, by name
	named map[string]int
	// the jobs' simulated clocks, added up
	simulated time.Duration
	// how long after they began the hangs were ended
	hangEndedMin, hangEndedMax time.Duration
}

func (t *envSimTally) add(j *envSimJob, r envSimResult) {
	t.jobs++
	if len(r.violations) > 0 {
		t.failed++
	}
	if r.endedByWatchdog && r.faultFired {
		t.hangsEnded++
	}
	if r.watchdogNamed != "" {
		if t.named == nil {
			t.named = map[string]int{}
		}
		t.named[r.watchdogNamed]++
	}
	if r.faultFired && j.fault == envFaultCopyError {
		t.copyErrors++
	}
	if r.faultFired && j.fault == envFaultL3Errors {
		t.l3Faults++
	}
	t.loadBacks, t.audits, t.reads, t.wrote = t.loadBacks+r.loadBacks, t.audits+r.audits,
		t.reads+r.reads, t.wrote+r.wrote
	t.readsGivenUp += r.readsGivenUp
	t.auditProbes, t.hidden, t.writeBacks = t.auditProbes+r.auditProbes, t.hidden+r.hidden,
		t.writeBacks+r.writeBacks
	if j.view.on() {
		t.splitReads += r.reads
	}
	t.simulated += r.simulated
	if r.hangEndedAfter > 0 {
		t.hangEndedMin = min(cmp.Or(t.hangEndedMin, r.hangEndedAfter), r.hangEndedAfter)
		t.hangEndedMax = max(t.hangEndedMax, r.hangEndedAfter)
	}
}

func (t envSimTally) String() string {
	hangs := errscope.Count(
		t.hangsEnded,
		"hang ended by its watchdog",
		"hangs ended by their watchdogs",
	)
	if t.hangEndedMax > 0 {
		hangs += fmt.Sprintf(
			" (%v to %v after they began, on the jobs' clocks)",
			t.hangEndedMin.Round(time.Millisecond),
			t.hangEndedMax.Round(time.Millisecond),
		)
	}
	return strings.Join([]string{
		hangs,
		errscope.Count(
			t.copyErrors,
			"copy error",
			"copy errors",
		), errscope.Count(t.l3Faults, "job with L3 faults", "jobs with L3 faults"),
		errscope.Count(
			t.loadBacks,
			"page loaded back and verified",
			"pages loaded back and verified",
		),
		errscope.Count(
			t.audits,
			"object audited",
			"objects audited",
		), errscope.Count(t.reads, "L3 block read", "L3 block reads"),
		errscope.Count(t.wrote, "L3 block written", "L3 blocks written"),
		errscope.Count(
			t.readsGivenUp,
			"L3 read given up at its deadline",
			"L3 reads given up at their deadlines",
		),
		errscope.Count(t.auditProbes, "audit probed part by part", "audits probed part by part"),
		errscope.Count(
			t.hidden,
			"L3 lookup a split view hid",
			"L3 lookups a split view hid",
		),
		errscope.Count(
			t.splitReads,
			"L3 block read under a split view",
			"L3 block reads under a split view",
		),
		errscope.Count(
			t.writeBacks,
			"write_back write near eviction",
			"write_back writes near eviction",
		),
		errscope.Count(t.failed, "job failed its checks", "jobs failed their checks"),
	}, ", ") + "; the watchdogs named: " + fmt.Sprint(t.named)
}

// missed names what no job reached.
func (t envSimTally) missed() string {
	var missed []string
	for _, m := range []struct {
		n    int64
		what string
	}{
		{int64(t.hangsEnded), "a hang ended by its watchdog"},
		{int64(t.copyErrors), "a copy error"},
		{int64(t.l3Faults), "L3 faults"},
		{t.loadBacks, "a load-back"},
		{t.audits, "an audit"},
		{t.reads, "an L3 block read"},
		{t.wrote, "an L3 block write"},
		{t.readsGivenUp, "an L3 read given up at its deadline"},
		{t.auditProbes, "an audit probed part by part"},
		{t.hidden, "an L3 lookup a split view hid"},
		{t.splitReads, "an L3 read under a split view"},
		{t.writeBacks, "a write_back write near eviction"},
	} {
		if m.n == 0 {
			missed = append(missed, m.what)
		}
	}
	return strings.Join(missed, ", ")
}
