package cli

// `cphicache sim`: the deterministic simulator of whole jobs over the IO-free core (hicache/sim).
// One process, no mpirun; the same seed and flags replay the same jobs and end with the same state
// hash.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/sim"
	"github.com/cphicache/cphicache/internal/errscope"
)

// simOptions are sim's flags.
type simOptions struct {
	seed, jobSeed uint64
	steps         int64
	jobs, cp      int
	seconds       float64
	bug, mode     string
	verbose       bool
}

// errSimViolation ends sim with a non-zero exit; the violation is already printed.
var errSimViolation = errors.New("sim: an invariant was broken (see above)")

// simCommand is `cphicache sim`: its help, its flags (simFlags), their check and its run.
func simCommand() *cli.Command {
	o := &simOptions{}
	return &cli.Command{
		Name:  "sim",
		Usage: "simulate whole jobs (every CP group and rank in one process) over the cache's IO-free core, with seeded timing and faults, checking every invariant after every step (needs no mpirun)",
		Description: "Each job is drawn from a seed derived from --seed: CP size and DP replicas, geometry, layout, write and L3 policies, " +
			"flushes, and one fault class (copy error, stuck copy, divergence, exit) or L3 faults (failed, corrupt, short, hung and " +
			"non-regular reads, ENOSPC and EIO writes, ranks that see different files, another job evicting). A violation prints the job's " +
			"seed and exits 1; `cphicache sim --job-seed S` replays that job alone, exactly.",
		Flags:        simFlags(o),
		OnUsageError: onUsageError,
		Before:       o.check,
		Action: func(c *cli.Context) error {
			newProvenance(c).WriteHeader(os.Stdout)
			return o.run(os.Stdout)
		},
	}
}

// simFlags are sim's flags, each writing into o, in the order --help and the man page list them;
// they are apart from simCommand so that the command's own fields read on one screen.
func simFlags(o *simOptions) []cli.Flag {
	return []cli.Flag{
		&cli.Uint64Flag{
			Name:        "seed",
			Value:       1,
			EnvVars:     []string{"CPHICACHE_SIM_SEED"},
			Destination: &o.seed,
			Usage:       "the simulation's seed: it decides every job, every completion's timing and every fault",
		},
		&cli.Int64Flag{
			Name:        "steps",
			Value:       40000,
			EnvVars:     []string{"CPHICACHE_SIM_STEPS"},
			Destination: &o.steps,
			Usage:       "stop once the jobs have made this many steps (each a step of one CP group); 0 = no step bound",
		},
		&cli.IntFlag{
			Name:        "jobs",
			EnvVars:     []string{"CPHICACHE_SIM_JOBS"},
			Destination: &o.jobs,
			Usage:       "stop after this many jobs; 0 = no job bound",
		},
		&cli.Float64Flag{
			Name:        "seconds",
			EnvVars:     []string{"CPHICACHE_SIM_SECONDS"},
			Destination: &o.seconds,
			Usage:       "stop after about this many seconds instead (a run so bounded depends on the machine's speed, so its hash does too)",
		},
		&cli.Uint64Flag{
			Name:        "job-seed",
			EnvVars:     []string{"CPHICACHE_SIM_JOB_SEED"},
			Destination: &o.jobSeed,
			Usage:       "run the one job of this seed (a violation's replay)",
		},
		&cli.IntFlag{Name: "cp", EnvVars: []string{"CPHICACHE_SIM_CP"}, Destination: &o.cp,
			Usage: "every job's CP size (0 = drawn: 1 to 8)"},
		&cli.StringFlag{
			Name:        "mode",
			Value:       "all",
			EnvVars:     []string{"CPHICACHE_SIM_MODE"},
			Destination: &o.mode,
			Usage:       "how jobs are drawn: plain (at most one core fault, the L3's faults together), swarm (each job a random subset of the features and fault kinds), liveness (each job one permanent fault: a rank that stops, an L3 that hangs; it must end by the watchdog within its bound), serving (plain jobs on the serving clock: steps formed on a modelled clock, each group's record replayed on the ideal and checked against it), or all (each job's mode drawn from its seed: plain, swarm or liveness)",
		},
		&cli.StringFlag{
			Name:        "bug",
			EnvVars:     []string{"CPHICACHE_SIM_BUG"},
			Destination: &o.bug,
			Usage:       "run with one of the core's deliberate bugs (a binary built with -tags simbugs): the simulator must catch it",
		},
		&cli.BoolFlag{
			Name:        "verbose",
			EnvVars:     []string{"CPHICACHE_SIM_VERBOSE"},
			Destination: &o.verbose,
			Usage:       "print every job's configuration and end",
		},
	}
}

func (o *simOptions) check(*cli.Context) error {
	if o.cp < 0 || o.cp > 16 {
		return &errscope.ConfigError{
			Flag:   "cp",
			Reason: fmt.Sprintf("%d: give 1 to 16 ranks, or 0 to draw each job's", o.cp),
		}
	}
	if o.steps < 0 || o.jobs < 0 || o.seconds < 0 {
		return &errscope.ConfigError{
			Flag:   "steps",
			Reason: "--steps, --jobs and --seconds take 0 or more",
		}
	}
	if o.bug != "" && !cache.BugsCompiled {
		return &errscope.ConfigError{
			Flag:   "bug",
			Reason: "this binary carries no deliberate bugs: build it with -tags simbugs (make sim-bugs)",
		}
	}
	return nil
}

func (o *simOptions) options() (sim.Options, error) {
	so := sim.Options{Seed: o.seed, Steps: o.steps, Jobs: o.jobs, JobSeed: o.jobSeed}
	if o.seconds > 0 {
		so.Steps = 0
	}
	mode, err := sim.ParseMode(o.mode)
	if err != nil {
		return so, &errscope.ConfigError{Flag: "mode", Reason: err.Error()}
	}
	so.Mode = mode
	if o.bug != "" {
		bug, err := cache.ParseBug(o.bug)
		if err != nil {
			return so, &errscope.ConfigError{Flag: "bug", Reason: err.Error()}
		}
		so.Bugs = so.Bugs.With(bug)
	}
	if o.cp > 0 {
		cp := o.cp
		so.Configure = func(j *sim.JobConfig) { *j = sim.DrawMode(j.Seed, j.Bugs, cp, mode) }
	}
	return so, nil
}

// run runs the simulation of o's flags and prints its header, its totals and its verdict to w; a
// broken invariant prints the job's replay and returns errSimViolation.
func (o *simOptions) run(w io.Writer) error {
	so, err := o.options()
	if err != nil {
		return err
	}
	start := time.Now()
	if o.seconds > 0 {
		so.Stop = func() bool { return time.Since(start).Seconds() >= o.seconds }
	}
	if o.verbose {
		so.Report = func(j sim.JobResult) { writeSimJob(w, j) }
	}
	fmt.Fprintf(
		w,
		"# cphicache sim: seed %d, steps %d, jobs %d, seconds %g, cp %d, mode %s, bug %q\n",
		o.seed,
		so.Steps,
		so.Jobs,
		o.seconds,
		o.cp,
		so.Mode,
		o.bug,
	)
	res := sim.Run(so)
	elapsed := time.Since(start).Seconds()
	writeSimWork(w, res, elapsed)
	writeSimModels(w, res)
	for _, line := range res.SometimesReport() {
		fmt.Fprintln(w, line)
	}
	return o.writeSimVerdict(w, res, elapsed)
}

// writeSimJob prints one finished job for --verbose: its seed, steps, outcome and configuration,
// so that a reader can pick the job to replay, and the watchdog's reason when it ended the job.
func writeSimJob(w io.Writer, j sim.JobResult) {
	fmt.Fprintf(
		w,
		"  job %d: %d steps, %s (exit status %d): %s\n",
		j.Config.Seed,
		j.Steps,
		j.Outcome,
		j.Outcome.ExitStatus(),
		j.Config.String(),
	)
	if j.Watchdog != "" {
		fmt.Fprintf(w, "    the watchdog: %s\n", j.Watchdog)
	}
}

// writeSimWork prints what the jobs did over elapsedSeconds: their outcomes, their steps and
// speed, the prompt tokens each tier served and the L3 blocks read and checked, so that a run
// shows it exercised the paths it claims to have checked.
func writeSimWork(w io.Writer, res sim.Result, elapsedSeconds float64) {
	fmt.Fprintf(
		w,
		"  %d jobs: %d clean, %d failed loudly on an injected fault, %d ended by the watchdog (an injected stuck copy, exit, stopped rank or hung L3); %d with an L3, %d with a fault\n",
		res.Jobs,
		res.Outcomes[sim.Clean],
		res.Outcomes[sim.FailedLoud],
		res.Outcomes[sim.WatchdogEnd],
		res.L3Jobs,
		res.FaultJobs,
	)
	fmt.Fprintf(
		w,
		"  %d steps of CP groups (%d of CP groups of 8 ranks; %d of groups over 2 nodes, %d over 4), %d rank steps, in %.2f s: %.0f rank steps/s, %.0f CP8-equivalent steps/s\n",
		res.Steps,
		res.CP8Steps,
		res.StepsOnNodes[2],
		res.StepsOnNodes[4],
		res.RankSteps,
		elapsedSeconds,
		float64(res.RankSteps)/elapsedSeconds,
		float64(res.RankSteps)/8/elapsedSeconds,
	)
	c := res.Totals
	fmt.Fprintf(
		w,
		"  prompt tokens: L1 hit %d, L2 hit %d, L3 hit %d, computed %d; %d L3 prefetches (%d cut short by a failed read, %d timed out, %d dropped by a flush); %s\n",
		c.L1HitTokens,
		c.L2HitTokens,
		c.L3HitTokens,
		c.MissTokens,
		c.L3Prefetches,
		c.L3PrefetchMisses,
		c.L3PrefetchTimeouts,
		c.L3PrefetchFlushed,
		errscope.Count(c.Flushes, "flush", "flushes"),
	)
	fmt.Fprintf(
		w,
		"  coverage: %d L3 blocks read into the slab, %d checked there against their keys' content (a job whose counts differ fails)\n",
		res.BlocksRead,
		res.BlocksChecked,
	)
}

// writeSimModels prints how often the model checks compared the cache with its models (existence
// votes, write_back's writes, prefetch decisions and served prefixes), so that a check that never
// ran is seen as such rather than passed.
func writeSimModels(w io.Writer, res sim.Result) {
	fmt.Fprintf(
		w,
		"  existence votes: %d prefetches read what the model says (%d where the ranks' runs differed), %d check spans checked\n",
		res.Models.Prefetches,
		res.Models.Split,
		res.Models.Spans,
	)
	fmt.Fprintf(
		w,
		"  write_back: %d block writes of objects near eviction, %d blocks through such objects required written (spanning backups too)\n",
		res.Models.WriteBacks,
		res.Models.WriteBackBlocks,
	)
	fmt.Fprintf(
		w,
		"  prefetch decisions: %d requests' as the model says, %d waiting for a prefetch (%d reservations refused, each without room); served prefixes: %d pages, %d of them held (the floor)\n",
		res.Models.Plans,
		res.Models.PlanWaits,
		res.Models.PlanMisses,
		res.Models.ServedPages,
		res.Models.ServedFloor,
	)
	if t := res.Served; t.Jobs > 0 {
		fmt.Fprintf(
			w,
			"  serving clock (MODELLED): %d groups' records replayed on the ideal (the run's own steps again), %d requests compared: %d equal to it before the machinery cost anything, %d groups whose first costly step came later than it, %d held to it as a floor (every one); on the virtual replay that forms its own steps (a sweep's clock), %d later after a step formed of other requests and %d after one passed differently; charges: %d longer L1 prefixes (%d strictly cheaper), %d slower tiers, %d loads held to their reads and load-backs, %d chunked passes left out; steps: %d requests computed in chunks, %d steps of two passes, %d formed empty, %d the machinery cost something\n",
			t.Jobs,
			t.Requests,
			t.Equal,
			t.CostShown,
			t.Floors,
			t.BreaksFormed,
			t.BreaksPassed,
			t.Longer,
			t.Strict,
			t.Slower,
			t.LoadFloors,
			t.Chunked,
			t.ChunkedRequests,
			t.TwoPassSteps,
			t.EmptySteps,
			t.CostlySteps,
		)
	}
}

// writeSimVerdict prints the run's last line, OK or FAILED, with its state hash over
// elapsedSeconds; on a violation it first prints the violation and the command that replays its
// job, and returns errSimViolation so that sim exits non-zero.
func (o *simOptions) writeSimVerdict(w io.Writer, res sim.Result, elapsedSeconds float64) error {
	if v := res.Violation; v != nil {
		fmt.Fprintf(
			w,
			"%s\n  replay: cphicache sim --job-seed %d --mode %s%s (this job alone), or the same flags again\n",
			v,
			v.JobSeed,
			res.LastJob.Mode,
			replayFlags(o),
		)
		fmt.Fprintf(
			w,
			"sim: FAILED at job seed %d, %.0f steps/s, state hash %016x\n",
			v.JobSeed,
			float64(res.Steps)/elapsedSeconds,
			res.Hash,
		)
		return errSimViolation
	}
	fmt.Fprintf(
		w,
		"sim: OK, %d steps in %d jobs, %.0f steps/s, state hash %016x\n",
		res.Steps,
		res.Jobs,
		float64(res.Steps)/elapsedSeconds,
		res.Hash,
	)
	return nil
}

// replayFlags are the flags besides the job seed and its mode that a replay needs: the CP size and
// the bug.
func replayFlags(o *simOptions) string {
	out := ""
	if o.cp > 0 {
		out += fmt.Sprintf(" --cp %d", o.cp)
	}
	if o.bug != "" {
		out += " --bug " + o.bug
	}
	return out
}
