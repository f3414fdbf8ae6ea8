package runner

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/mpi"
)

// A fault injected for validation must end the run: a run that asked for one and ended well either
// never reached it (a step past the workload's end, a copy fault armed after the rank's last copy)
// or reached it and no check caught it. Either way the detector was not shown to work, and a plain
// OK would say it was.

// injectionMiss is how an injected fault of this rank failed to end the run, in the order of its
// badness (the job's is the MAX over its ranks).
const (
	injectionFired       int64 = iota // or not this rank's, or not asked for
	injectionNotReached               // the run ended before the fault's step
	injectionNothingToDo              // armed, but the rank made no copy from its step to the end
	injectionUncaught                 // the placement was perturbed and no check caught it
)

// injectionMisses are this rank's misses, one per config.Options.InjectionFlags entry, after a
// replay that ended well.
func (rs *runState) injectionMisses() []int64 {
	misses := make([]int64, 0, 5)
	for _, f := range rs.opts.InjectionFlags() {
		miss := injectionFired
		if f.Injection.Set && f.Injection.Rank == rs.job.Topo.WorldRank {
			miss = injectionNotReached
			switch f.Flag {
			case "inject-divergence":
				if rs.divergenceDue {
					miss = injectionUncaught
				}
			case "inject-copy-error":
				if rs.faults.failed.Load() {
					miss = injectionFired // its copy failed, and the report counts the error
				} else if rs.faults.failNext.Load() {
					miss = injectionNothingToDo
				}
			case "inject-stuck-copy":
				if rs.faults.stickNext.Load() {
					miss = injectionNothingToDo
				}
			}
		}
		misses = append(misses, miss)
	}
	return misses
}

// checkInjectionsFired, after a replay that ended well on every rank, fails the run (every rank
// alike) with the report's failure set when an injected fault did not end it. A World collective,
// but only when a fault was asked for, which every rank knows alike.
func (rs *runState) checkInjectionsFired(r *report.Report) error {
	flags := rs.opts.InjectionFlags()
	asked := false
	for _, f := range flags {
		asked = asked || f.Injection.Set
	}
	if !asked {
		return nil
	}
	misses := rs.injectionMisses()
	if err := rs.job.Topo.World.AllreduceInt64(misses, misses, mpi.Max); err != nil {
		return err
	}
	for i, f := range flags {
		if misses[i] == injectionFired {
			continue
		}
		given := fmt.Sprintf("--%s %d@%d", f.Flag, f.Injection.Rank, f.Injection.Step)
		var msg string
		switch misses[i] {
		case injectionNotReached:
			msg = fmt.Sprintf(
				"%s never fired: world rank %d's replay ended before step %d, so nothing was tested",
				given,
				f.Injection.Rank,
				f.Injection.Step,
			)
		case injectionNothingToDo:
			msg = fmt.Sprintf(
				"%s never fired: world rank %d made no copy from step %d to the end of its replay, so nothing was tested",
				given,
				f.Injection.Rank,
				f.Injection.Step,
			)
		default:
			msg = fmt.Sprintf(
				"%s perturbed world rank %d's placement at step %d and no check caught it",
				given,
				f.Injection.Rank,
				f.Injection.Step,
			)
		}
		r.Failure = &report.FailureReport{Check: "injection", Step: -1, WorldRank: -1, Message: msg}
		return &InjectionMissed{Message: msg}
	}
	return nil
}

// InjectionMissed ends a run whose injected fault did not end it (checkInjectionsFired). Every rank
// holds the same aggregated verdict.
type InjectionMissed struct{ Message string }

func (e *InjectionMissed) Error() string         { return "run failed: " + e.Message }
func (e *InjectionMissed) Scope() errscope.Scope { return errscope.JobScope }
