package sim

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/pool"
)

// Options is one simulation: a run of jobs, each drawn from a seed derived from Seed.
type Options struct {
	Seed uint64
	// Steps stops the run once its jobs have made this many group steps (0: Jobs alone decides).
	Steps int64
	// Jobs stops it after this many jobs (0: Steps alone decides).
	Jobs int
	// JobSeed, when set, runs that one job alone (a violation's replay).
	JobSeed uint64
	// Bugs are the deliberate bugs every job carries (a simbugs build only).
	Bugs cache.Bugs
	// Mode says how jobs are drawn (swarm.go): plain (Draw), swarm, liveness, or all three.
	Mode Mode
	// Configure, when set, may change each job's drawn configuration (tests).
	Configure func(*JobConfig)
	// Stop, when set, is asked after every job whether to stop (the command's clock).
	Stop func() bool
	// Report, when set, is told how every job ended.
	Report func(JobResult)
}

// Result is what a simulation did.
type Result struct {
	Jobs int
	// group steps, and rank steps (a group step of cp ranks is cp of them)
	Steps, RankSteps  int64
	CP8Steps          int64    // group steps of CP groups of 8 ranks
	StepsOnNodes      [5]int64 // group steps of CP groups over 1, 2 and 4 nodes, by node count
	Outcomes          [outcomeKinds]int
	Hash              uint64 // of every job's final state: the same for the same options
	Violation         *Violation
	LastJob           JobConfig
	L3Jobs, FaultJobs int
	// jobs whose hits were compared with the sequential model
	ModelChecked int
	// by interesting branch (sometimes.go), the jobs that took it
	Reached [sometimesKinds]int
	Modes   [modeKinds]int // jobs by the mode they were drawn in
	Swarm   swarmCoverage  // what the swarm jobs enabled
	// liveness jobs whose permanent fault fired, and of them those it stalled (each ended by the
	// watchdog)
	Permanent, Stalled int
	BlocksRead         int64 // L3 blocks read into the slab
	BlocksChecked      int64 // of them, checked there by the simulator
	// what the decision models checked (votes.go, writeback.go)
	Models ModelTally
	// What the jobs' groups did, summed (replicated counters, from each group's CP rank 0): proof
	// that the paths the checks watch were taken.
	Totals cache.Counters
	Served ClockTally // what the serving clock's checks compared (clockcheck.go)
}

// JobSeed is the seed of the i-th job of a simulation of seed.
func JobSeed(
	seed uint64,
	i int,
) uint64 {
	return pool.Mix64(seed*0x2545f4914f6cdd1d + uint64(i) + 1)
}

// Run runs jobs until a violation, the step or job budget, or Stop.
func Run(o Options) Result {
	var res Result
	res.Hash = o.Seed
	for i := 0; ; i++ {
		seed := JobSeed(o.Seed, i)
		if o.JobSeed != 0 {
			seed = o.JobSeed
		}
		cfg := DrawMode(seed, o.Bugs, 0, o.Mode)
		if o.Configure != nil {
			o.Configure(&cfg)
		}
		jr := runWithPoolBugs(o.Bugs, cfg)
		res.add(jr)
		if o.Report != nil {
			o.Report(jr)
		}
		if res.Violation != nil || o.JobSeed != 0 || (o.Jobs > 0 && res.Jobs >= o.Jobs) ||
			(o.Steps > 0 && res.Steps >= o.Steps) ||
			(o.Stop != nil && o.Stop()) {
			return res
		}
	}
}

// runWithPoolBugs runs one job with the deliberate bugs that live in pool installed for it (pool
// has no Bugs of its own: they are process-wide switches, so a job carrying one must not run beside
// another).
func runWithPoolBugs(bugs cache.Bugs, cfg JobConfig) JobResult {
	if bugs.Has(cache.BugResetKeepsFreeBitmap) {
		defer pool.BreakResetForTest()()
	}
	if bugs.Has(cache.BugDigestMissesStart) {
		defer pool.BreakDigestForTest()()
	}
	if bugs.Has(cache.BugHitChargeIgnoresL1) {
		defer serving.BreakHitChargeForTest()()
	}
	if bugs.Has(cache.BugL3ReadFree) {
		defer serving.BreakL3ReadChargeForTest()()
	}
	return RunJob(cfg)
}

// JobResult is one job's end.
type JobResult struct {
	Totals       cache.Counters // the replicated counters of the job's groups, summed
	Config       JobConfig
	Steps        int64
	Outcome      Outcome
	Hash         uint64
	Violation    *Violation
	ModelChecked bool
	ReadsGivenUp int64 // L3 reads given up at their deadline
	Fired        bool  // the injected fault took effect
	// the first divergence group 0's checks caught (its step and which consensus), nil when none
	Caught *cache.DivergenceError
	// a permanent fault took hold that only the watchdog can end (a rank stopped, an L3 write hung)
	Stalled bool
	// the watchdog's line when it ended the job: what every rank still running waited on
	Watchdog string
	// L3 blocks read into the slab, and checked there against their content by the simulator
	// (blocks.go).
	BlocksRead, BlocksChecked int64
	Models                    ModelTally
	Served                    ClockTally // the serving clock's checks (serving-clock jobs)
}

// RunJob simulates one job.
func RunJob(cfg JobConfig) JobResult { return runJob(cfg, nil) }

// runJob simulates one job. A panic anywhere in it (the core's step program, the simulator's Env,
// scheduler or checks) is the job's violation, with its seed, not the end of the process: the run
// reports it as any other.
func runJob(cfg JobConfig, tamper func([]cache.Outcome)) (out JobResult) {
	defer func() {
		if p := recover(); p != nil {
			out = JobResult{
				Config: cfg,
				Violation: &Violation{JobSeed: cfg.Seed, Group: -1, Rank: -1, Config: cfg.String(),
					What: fmt.Sprintf(
						"the simulator panicked (outside any rank's step program): %v",
						p,
					)},
			}
		}
	}()
	j, err := newJob(cfg)
	if err != nil {
		return JobResult{
			Config: cfg,
			Violation: &Violation{
				JobSeed: cfg.Seed,
				Group:   -1,
				Rank:    -1,
				What:    "the core refused the configuration: " + err.Error(),
				Config:  cfg.String(),
			},
		}
	}
	j.tamperOutcome = tamper
	j.run()
	out = JobResult{
		Config:        cfg,
		Fired:         j.firedAt != 0,
		Stalled:       j.stalled,
		Watchdog:      j.stuck,
		BlocksRead:    j.blocks.read,
		BlocksChecked: j.blocks.checked,
	}
	if j.violation == nil {
		out.Outcome = j.finalChecks()
	}
	out.ModelChecked = j.modelChecked
	for _, r := range j.groups[0].ranks {
		if out.Caught == nil && r.err != nil {
			errors.As(r.err, &out.Caught)
		}
	}
	out.ReadsGivenUp = j.readsGivenUp
	out.Violation, out.Models, out.Served = j.violation, j.models, j.served
	for _, g := range j.groups {
		out.Steps += g.ranks[0].steps
		c := g.ranks[0].core.Counters()
		sum := out.Totals.CounterFields("group")
		for i, v := range c.CounterFields("group") {
			*sum[i] += *v
		}
	}
	out.Hash = j.hash()
	return out
}

func (res *Result) add(j JobResult) {
	res.Jobs++
	res.Steps += j.Steps
	res.RankSteps += j.Steps * int64(j.Config.CP)
	if j.Config.CP == 8 {
		res.CP8Steps += j.Steps
	}
	res.StepsOnNodes[max(1, j.Config.Geometry.Nodes)] += j.Steps
	res.Outcomes[j.Outcome]++
	res.Hash = pool.Mix64(res.Hash ^ j.Hash)
	res.Violation, res.LastJob = j.Violation, j.Config
	if j.Config.L3.Enabled {
		res.L3Jobs++
	}
	if j.Config.Fault != FaultNone {
		res.FaultJobs++
	}
	if j.ModelChecked {
		res.ModelChecked++
	}
	res.Modes[j.Config.Mode]++
	res.BlocksRead += j.BlocksRead
	res.BlocksChecked += j.BlocksChecked
	res.Models.add(j.Models)
	res.Served.add(j.Served)
	res.Swarm.add(j.Config.Swarm)
	if j.Config.Fault.permanent() && j.Fired {
		res.Permanent++
	}
	if j.Stalled {
		res.Stalled++
	}
	for kind, reached := range j.sometimes() {
		if reached {
			res.Reached[kind]++
		}
	}
	sum := res.Totals.CounterFields("group")
	for i, v := range j.Totals.CounterFields("group") {
		*sum[i] += *v
	}
}
