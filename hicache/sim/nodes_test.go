package sim

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
)

// TestGroupsOverNodesFindNothing runs jobs whose CP groups span 2 and 4 nodes (blocks and round
// robin), over every write policy, fault class and flush schedule the draw gives, and an L3 of one
// part-file a node with its directory's faults: the cache must break no invariant, every committed
// object must be audited on every node (group.checkAudits), and the jobs must cover that space, L3
// hits and failed prefetches included.
func TestGroupsOverNodesFindNothing(t *testing.T) {
	var policies [3]int
	var faults [faultKinds]int
	flushes, audited := 0, int64(0)
	res := Run(Options{Seed: 7, Jobs: 240, Configure: func(j *JobConfig) {
		slabSlots := j.Geometry.SlabBytesMax / j.Geometry.SlotBytes()
		j.CP = []int{4, 8, 8}[j.Seed%3]
		j.Geometry.CPSize, j.Geometry.Nodes = j.CP, 0
		j.Geometry.SlabBytesMax = slabSlots * j.Geometry.SlotBytes()
		j.FaultRank %= j.CP
		j.SpreadOverNodes([]int{2, 4}[j.Seed/3%2], j.Seed/6%2 == 0)
		policies[j.Policy]++
		faults[j.Fault]++
		if j.FlushEvery > 0 {
			flushes++
		}
	}, Report: func(jr JobResult) { audited += jr.Totals.BackupCommitted }})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if res.StepsOnNodes[2] == 0 || res.StepsOnNodes[4] == 0 || res.StepsOnNodes[1] != 0 ||
		flushes == 0 || audited == 0 ||
		policies[cache.WriteThrough] == 0 || policies[cache.WriteThroughSelective] == 0 ||
		policies[cache.WriteBack] == 0 ||
		faults[FaultCopyError] == 0 || faults[FaultStuckCopy] == 0 ||
		faults[FaultDivergence] == 0 ||
		faults[FaultExit] == 0 {
		t.Errorf(
			"the jobs miss a part of the space: steps on 1/2/4 nodes %d/%d/%d, policies %v, faults %v, %d with flushes, %d commits",
			res.StepsOnNodes[1],
			res.StepsOnNodes[2],
			res.StepsOnNodes[4],
			policies,
			faults,
			flushes,
			audited,
		)
	}
	if res.Totals.L2HitTokens == 0 || res.Outcomes[FailedLoud] == 0 {
		t.Errorf(
			"no L2 hits (%d) or no loud failure (%v) over nodes",
			res.Totals.L2HitTokens,
			res.Outcomes,
		)
	}
	if c := res.Totals; c.L3HitTokens == 0 || c.L3PrefetchMisses == 0 {
		t.Errorf(
			"over nodes, the L3 served %d hit tokens, %d prefetches cut short: want both",
			c.L3HitTokens,
			c.L3PrefetchMisses,
		)
	}
	t.Logf(
		"%d jobs, %d steps (%d over 2 nodes, %d over 4), outcomes %v",
		res.Jobs,
		res.Steps,
		res.StepsOnNodes[2],
		res.StepsOnNodes[4],
		res.Outcomes,
	)
}
