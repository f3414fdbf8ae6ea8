package sim

import "fmt"

// "Sometimes" assertions, in the manner of Antithesis's: branches that the checks exist for and
// that a run of the simulator must reach now and then, or it proves nothing about them. Each job
// says which it reached; the run counts the jobs, and SometimesReport names the branches a seed
// range never reached.

// Branch is one interesting branch of the cache.
type Branch int

const (
	PrefetchCutShort Branch = iota // a prefetch cut short by a failed read
	ReadGivenUp                    // an L3 read given up at its deadline
	// a flush that found L3 block writes in flight and met again until they settled
	FlushWithL3Writes
	WriteBackEviction // a write_back block write of an object near eviction
	// a reservation that missed: the L2 had no room even after eviction
	CapacityMiss
	sometimesKinds
)

var branchNames = [sometimesKinds]string{
	PrefetchCutShort:  "a prefetch cut short by a failed read",
	ReadGivenUp:       "an L3 read given up at its deadline",
	FlushWithL3Writes: "a flush with L3 writes in flight",
	WriteBackEviction: "a write_back write of an object near eviction",
	CapacityMiss:      "a capacity miss in the L2",
}

func (b Branch) String() string { return branchNames[b] }

// sometimes says which interesting branches the job took, from its groups' counters and the
// scheduler's.
func (j JobResult) sometimes() [sometimesKinds]bool {
	c := &j.Totals
	return [sometimesKinds]bool{
		PrefetchCutShort:  c.L3PrefetchMisses > 0,
		ReadGivenUp:       j.ReadsGivenUp > 0,
		FlushWithL3Writes: c.L3FlushSettles > 0,
		WriteBackEviction: c.L3WriteBackEvicts > 0,
		CapacityMiss:      c.ReserveMisses > 0,
	}
}

// Unreached lists the interesting branches no job of the run took.
func (res *Result) Unreached() []Branch {
	var never []Branch
	for b, n := range res.Reached {
		if n == 0 {
			never = append(never, Branch(b))
		}
	}
	return never
}

// SometimesReport is the run's "sometimes" lines, for the command to print at its end: each
// interesting branch with the jobs that took it, NEVER for one that none did.
func (res *Result) SometimesReport() []string {
	lines := []string{fmt.Sprintf("  sometimes (jobs of %d that took each branch):", res.Jobs)}
	for b, n := range res.Reached {
		reached := fmt.Sprint(n)
		if n == 0 {
			reached = "NEVER"
		}
		lines = append(lines, fmt.Sprintf("    %-48s %s", Branch(b).String()+":", reached))
	}
	if n := res.Modes[ModeLiveness]; n > 0 {
		lines = append(
			lines,
			fmt.Sprintf(
				"  liveness: %d jobs, %d whose permanent fault fired, %d it stalled (a rank stopped, an L3 write hung), each ended by the watchdog within its bound",
				n,
				res.Permanent,
				res.Stalled,
			),
		)
	}
	return append(lines, res.Swarm.report()...)
}
