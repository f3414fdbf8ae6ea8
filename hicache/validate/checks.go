package validate

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/mpi"
)

// The matrix's rows but the L3's (l3.go): each reads the passes' results and agrees on them over
// the World, so that every rank holds the same row.

func verdict(c report.Check, ok bool) report.Check {
	c.Result = "pass"
	if !ok {
		c.Result = "fail"
	}
	return c
}

// coveredVerdict is verdict for a check that watches a path the workload may never take (a miss, a
// load-back, an L3 hit): nothing wrong on a path never taken is a skip that says so, not a pass and
// not a failure. Which paths a run takes depends on when its asynchronous copies land, so a small
// workload on a busy node can miss one that it takes on a quiet node (--strict makes the skip
// fail).
func coveredVerdict(c report.Check, ok, exercised bool) report.Check {
	if ok && !exercised {
		c.Result, c.Skipped, c.Detail = "skip", report.SkipNotExercised, "not exercised: "+c.Detail
		return c
	}
	return verdict(c, ok && exercised)
}

// singleRankSkip is a check with nothing to compare in a one-rank CP group.
func singleRankSkip(c report.Check, detail string) report.Check {
	c.Result, c.Skipped, c.Wrong, c.Detail = "skip", report.SkipSingleRank, 0, detail
	return c
}

// checkPlacement: every object placed identically on every CP rank (per-object hashes, not only
// digests).
func (rs *pass) checkPlacement() (report.Check, error) {
	c := (&rs.Counters)
	v, err := rs.sumOverGroups(
		[]int64{c.ObjectsCompared, c.ObjectsWrong, c.Divergences, c.PlacementChecks, rs.Steps},
		nil,
	)
	if err != nil {
		return report.Check{}, err
	}
	check := report.Check{
		Name:   "placement_identical",
		Ranks:  rs.job.Topo.World.Size(),
		Steps:  v[4],
		Wrong:  v[1] + v[2],
		Detail: fmt.Sprintf("%d digest asserts, %d object placements compared", v[3], v[0]),
	}
	if rs.job.Topo.CPSize == 1 {
		return singleRankSkip(check, "single-rank CP groups: nothing to compare"), nil
	}
	return verdict(check, check.Wrong == 0 && v[0] > 0 && v[3] > 0), nil
}

// checkDivergenceDetected: the injected perturbation is caught at the first assert after it, and
// the group then carries on from a fresh state with no further divergence. A group whose workload
// ends before the perturbation's step was never perturbed: it must see no divergence, and when no
// group was perturbed the row is a skip that says why (a fault never injected is neither caught nor
// missed).
func (rs *pass) checkDivergenceDetected() (report.Check, error) {
	c := (&rs.Counters)
	steps := rs.Steps
	injected, wrong := divergenceOutcome(
		steps,
		c.DivergenceFirstStep,
		c.Divergences,
		rs.opts.FlushEvery,
	)
	endsAtInjection := int64(
		0,
	) // caught by the final consensus, where a longer workload's next step catches it
	if steps == divergenceInjectStep &&
		divergenceWantStep(rs.opts.FlushEvery, steps+1) != divergenceInjectStep {
		endsAtInjection = 1
	}
	v, err := rs.sumOverGroups([]int64{injected, wrong, c.Divergences, steps, endsAtInjection}, nil)
	if err != nil {
		return report.Check{}, err
	}
	injectedGroups, detections, groups := v[0], v[2], int64(rs.job.Topo.DPSize)
	want := fmt.Sprintf("step %d", divergenceWantStep(rs.opts.FlushEvery, divergenceInjectStep+1))
	if v[4] > 0 {
		// A workload that ends at the perturbation's step has only its final consensus left to
		// catch it.
		want += fmt.Sprintf(
			" (the final consensus at step %d where the workload ends there)",
			divergenceInjectStep,
		)
	}
	check := report.Check{
		Name:  "divergence_detected",
		Ranks: rs.job.Topo.World.Size(),
		Steps: v[3],
		Wrong: v[1],
		Detail: fmt.Sprintf(
			"perturbed after step %d's consensus, want caught at %s; %s in %s",
			divergenceInjectStep,
			want,
			errscope.Count(
				detections,
				"detection",
				"detections",
			),
			errscope.Count(groups, "group", "groups"),
		),
	}
	switch {
	case injectedGroups == 0:
		check.Detail = fmt.Sprintf(
			"never perturbed: the workload ended before step %d, whose consensus the perturbation follows; %s in %s",
			divergenceInjectStep,
			errscope.Count(detections, "detection", "detections"),
			errscope.Count(groups, "group", "groups"),
		)
	case injectedGroups < groups:
		check.Detail += fmt.Sprintf(
			"; %d of %d never perturbed (workload ended before step %d)",
			groups-injectedGroups,
			groups,
			divergenceInjectStep,
		)
	}
	if rs.job.Topo.CPSize == 1 {
		return singleRankSkip(check, "single-rank CP groups cannot diverge"), nil
	}
	return coveredVerdict(check, check.Wrong == 0, injectedGroups > 0), nil
}

// divergenceOutcome is one CP group's divergence pass: injected is 1 when its workload reached the
// perturbation's step, and wrong counts its detections that break the rule (the first one late or
// missing, any after it, any at all when it was never perturbed).
func divergenceOutcome(steps, firstStep, detections, flushEvery int64) (injected, wrong int64) {
	if steps < divergenceInjectStep {
		return 0, detections
	}
	wrong = max(0, detections-1)
	if firstStep != divergenceWantStep(flushEvery, steps) {
		wrong++
	}
	return 1, wrong
}

// divergenceWantStep is the step whose consensus must catch the divergence pass's perturbation in a
// workload of steps steps: the flush that follows at the same step when --flush-every falls on it,
// the final consensus (still at that step) when the workload ends there, else the next step's
// consensus.
func divergenceWantStep(flushEvery, steps int64) int64 {
	if (flushEvery > 0 && divergenceInjectStep%flushEvery == 0) || steps == divergenceInjectStep {
		return divergenceInjectStep
	}
	return divergenceInjectStep + 1
}

// checkFlushReset: every flush of every pass left the cache equal to a fresh one: the allocator's
// state hash (every table walked) against a fresh allocator's, the tree and the device pool empty.
// The main pass flushes at least once, so the row always has a flush to check.
func checkFlushReset(passes ...*pass) (report.Check, error) {
	var flushes, wrong int64
	for _, rs := range passes {
		v, err := rs.sumOverGroups(nil, []int64{(&rs.Counters).Flushes, (&rs.Counters).FlushWrong})
		if err != nil {
			return report.Check{}, err
		}
		flushes, wrong = flushes+v[0], wrong+v[1]
	}
	steps, err := passes[0].steps64()
	if err != nil {
		return report.Check{}, err
	}
	check := report.Check{
		Name:  "flush_reset",
		Ranks: passes[0].job.Topo.World.Size(),
		Steps: steps,
		Wrong: wrong,
		Detail: fmt.Sprintf(
			"%s compared with a fresh cache (allocator state hash, tree, device pages)",
			errscope.Count(flushes, "rank-flush", "rank-flushes"),
		),
	}
	return verdict(check, wrong == 0 && flushes > 0), nil
}

// checkScoping: every consensus collective of every pass ran on a communicator of exactly cp ranks,
// and none ran on a single-rank group. Counted per kind of collective.
func checkScoping(passes ...*pass) (report.Check, error) {
	cp := passes[0].job.Topo.CPSize
	var wrong, ran int64
	for _, rs := range passes {
		for _, s := range rs.Collectives {
			ran += s.Count
			if s.Count > 0 && (s.CommSizeMin != cp || s.CommSizeMax != cp || cp == 1) {
				wrong++
			}
		}
	}
	v, err := passes[0].sumOverGroups(nil, []int64{wrong, ran})
	if err != nil {
		return report.Check{}, err
	}
	steps, err := passes[0].steps64()
	if err != nil {
		return report.Check{}, err
	}
	check := report.Check{
		Name:  "cp_scoping",
		Ranks: passes[0].job.Topo.World.Size(),
		Steps: steps,
		Wrong: v[0],
		Detail: fmt.Sprintf(
			"%d consensus collectives, each on a communicator of %d ranks",
			v[1],
			cp,
		),
	}
	if cp == 1 {
		check.Detail = "single-rank CP groups: every consensus collective was skipped, none ran on a size-1 group"
		return verdict(check, v[0] == 0 && v[1] == 0), nil
	}
	return verdict(check, v[0] == 0 && v[1] > 0), nil
}

// checkCapacity: with an L2 far smaller than the working set, the miss path (evict, or skip the
// backup) took the same decisions on every rank of each CP group.
func (rs *pass) checkCapacity() (report.Check, error) {
	c := (&rs.Counters)
	local := []uint64{uint64(c.ReserveMisses), uint64(c.L2Evictions), uint64(c.BackupReserved)}
	minMax := make([]uint64, 2*len(local))
	for i, x := range local {
		minMax[2*i], minMax[2*i+1] = x, ^x
	}
	if rs.job.Topo.CPSize > 1 {
		if err := rs.job.Topo.CP.AllreduceUint64(minMax, minMax, mpi.Min); err != nil {
			return report.Check{}, err
		}
	}
	var differ int64
	for i := range local {
		if minMax[2*i] != ^minMax[2*i+1] {
			differ++
		}
	}
	v, err := rs.sumOverGroups([]int64{differ, c.ReserveMisses, c.L2Evictions, rs.Steps}, nil)
	if err != nil {
		return report.Check{}, err
	}
	check := report.Check{
		Name:  "capacity_miss_uniform",
		Ranks: rs.job.Topo.World.Size(),
		Steps: v[3],
		Wrong: v[0],
		Detail: fmt.Sprintf(
			"L2 of %d slots: %d backups skipped, %d L2 evictions",
			rs.opts.L2Slots,
			v[1],
			v[2],
		),
	}
	return coveredVerdict(check, v[0] == 0, v[1]+v[2] > 0), nil
}

// checkData: every load-back of every pass matched the content function byte for byte, and every
// page loaded back was verified: a load-back released without its check has right bytes as often
// as not, so only the pages loaded back beside the pages verified can show it.
func checkData(passes ...*pass) (report.Check, error) {
	var checked, loadedBack, mismatches, steps int64
	for _, rs := range passes {
		c := &rs.Counters
		v, err := rs.sumOverGroups(
			[]int64{rs.Steps},
			[]int64{c.PagesChecked, c.Mismatches, c.PagesLoadedBack},
		)
		if err != nil {
			return report.Check{}, err
		}
		steps, checked, mismatches = steps+v[0], checked+v[1], mismatches+v[2]
		loadedBack += v[3]
	}
	// pages left unverified are wrong pages too (or pages verified twice, should a count go wrong)
	unverified := max(loadedBack-checked, checked-loadedBack)
	check := report.Check{
		Name:   "data_integrity",
		Ranks:  passes[0].job.Topo.World.Size(),
		Steps:  steps,
		Wrong:  mismatches + unverified,
		Detail: fmt.Sprintf("%d load-back pages verified byte for byte", checked),
	}
	if unverified != 0 { // a sound run's row keeps its words
		check.Detail += fmt.Sprintf(
			" of %d loaded back (%s)",
			loadedBack,
			report.UnverifiedCheck,
		)
	}
	return coveredVerdict(check, mismatches == 0 && unverified == 0, checked > 0), nil
}
