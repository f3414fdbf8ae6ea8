package sim

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/hicache/workload"
)

// TestEveryBlockReadIsChecked: over a bounded run, every L3 block read into the slab was checked
// there against its key's content by the simulator itself (blocks.go), and there were many; and the
// existence-vote model (votes.go) checked many prefetches, some whose ranks' runs differed, and
// every check span; and the write_back model (writeback.go) many writes near eviction and blocks
// required written, the prefetch-decision model (plan.go) many requests and some refused
// reservations, and the served-prefix model (served.go) many pages.
func TestEveryBlockReadIsChecked(t *testing.T) {
	res := Run(Options{Seed: 1, Jobs: 150})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if res.BlocksRead < 50 || res.BlocksChecked != res.BlocksRead {
		t.Errorf(
			"%d blocks read, %d checked: want many, all checked",
			res.BlocksRead,
			res.BlocksChecked,
		)
	}
	t.Logf(
		"%d jobs: %d L3 blocks read into the slab, %d checked there",
		res.Jobs,
		res.BlocksRead,
		res.BlocksChecked,
	)
	if v := res.Models; v.Prefetches < 50 || v.Split == 0 || v.Spans < v.Prefetches {
		t.Errorf(
			"the existence-vote model checked %d prefetches (%d where the runs differed) and %d spans: want many, some split",
			v.Prefetches,
			v.Split,
			v.Spans,
		)
	}
	if v := res.Models; v.WriteBacks < 50 || v.WriteBackBlocks < 50 || v.PlanWaits < 50 ||
		v.Plans-v.PlanWaits < 50 {
		t.Errorf(
			"the write_back model checked %d writes near eviction and required %d blocks written, the prefetch-decision model %d requests (%d waiting): want many of each, and many not waiting",
			v.WriteBacks,
			v.WriteBackBlocks,
			v.Plans,
			v.PlanWaits,
		)
	}
	if v := res.Models; v.ServedPages < 50 || v.ServedFloor < 50 || v.PlanMisses == 0 {
		t.Errorf(
			"the served-prefix model checked %d pages served, %d held, the prefetch-decision model %d refused reservations: want many, many, and some",
			v.ServedPages,
			v.ServedFloor,
			v.PlanMisses,
		)
	}
	t.Logf("the decision models: %+v", res.Models)
}

// TestTheBlockBookFails: a block write whose key does not name its tokens, and a block read the
// simulator could not check, are each a violation.
func TestTheBlockBookFails(t *testing.T) {
	cfg := Draw(JobSeed(1, 0), 0, 0)
	cfg.Geometry.PageTokens, cfg.L3 = 2, cache.L3Config{Enabled: true, BlockTokens: 4}
	events := []workload.Event{
		{Request: workload.Request{InputIDs: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}}},
	}
	j := &job{cfg: cfg}
	j.blocks.learn(events, &j.cfg)
	first := l3block.ChainKey(0, []int32{1, 2, 3, 4})
	second := l3block.ChainKey(first, []int32{5, 6, 7, 8})
	if len(j.blocks.content) != 2 {
		t.Fatalf("a prompt of two whole blocks and a partial page: %d keys", len(j.blocks.content))
	}
	j.blocks.written(
		j,
		nil,
		&cache.BlockWrite{Key: second, Tokens: []int32{5, 6, 7, 8}, StartPos: 4},
	)
	if j.violation != nil {
		t.Fatalf("the second block's own key: %v", j.violation)
	}
	j.blocks.written(
		j,
		nil,
		&cache.BlockWrite{
			Key:      l3block.ChainKey(0, []int32{5, 6, 7, 8}),
			Tokens:   []int32{5, 6, 7, 8},
			StartPos: 4,
		},
	)
	if j.violation == nil || !strings.Contains(j.violation.What, "which that key does not name") {
		t.Errorf("a key over the block's tokens alone, not the chain: %v", j.violation)
	}
	j.violation = nil
	j.blocks.readInto(j, nil, &cache.BlockRead{Key: 12345})
	j.blocks.checkCovered(j)
	if j.violation == nil ||
		!strings.Contains(j.violation.What, "1 L3 blocks read into the slab, 0 checked") {
		t.Errorf("a block read that was not checked: %v", j.violation)
	}
}

// TestTheFailedReadModelFails: a group that agreed fewer failed prefetches than its readers saw
// fail (a rule that forgets a failure: every rank agrees it, and no byte goes wrong), or more, is a
// violation; as many is not.
func TestTheFailedReadModelFails(t *testing.T) {
	cfg := Draw(JobSeed(1, 0), 0, 0)
	cfg.Fault, cfg.DP = FaultNone, 1
	drawL3(newRNG(1), &cfg)
	j, err := newJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g := j.groups[0]
	g.prefetchRead(&cache.BlockRead{Prefetch: 1, Block: 0}, nil)
	g.prefetchRead(&cache.BlockRead{Prefetch: 1, Block: 1}, errSimEIO)
	g.prefetchRead(&cache.BlockRead{Prefetch: 2, Block: 0}, nil)
	agreed := cache.Counters{L3Prefetches: 2, L3PrefetchBlocks: 3, L3PrefetchMisses: 1}
	if g.checkPrefetches(&agreed); j.violation != nil {
		t.Fatalf("the agreed counts of what was read: %v", j.violation)
	}
	for _, misses := range []int64{0, 2} {
		j.violation = nil
		agreed.L3PrefetchMisses = misses
		if g.checkPrefetches(&agreed); j.violation == nil ||
			!strings.Contains(j.violation.What, "1 with a failed read") {
			t.Errorf("%d agreed failed prefetches of 1: %v", misses, j.violation)
		}
	}
}

// TestServedFromWhereTheBytesCame: a step's hits must be exactly the pages it loaded back, by where
// their bytes came from (provenance.go); a Fill naming a prefetched node's L2 slots makes its next
// load-back the L2's.
func TestServedFromWhereTheBytesCame(t *testing.T) {
	cfg := Draw(JobSeed(1, 0), 0, 0)
	cfg.Fault = FaultNone
	j, err := newJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r, pt := j.groups[0].ranks[0], int64(cfg.Geometry.PageTokens)
	step := &cache.ServedStep{
		Step:     1,
		Requests: []cache.Served{{Outcome: cache.Outcome{L2Hit: 2 * pt, L3Hit: pt}}},
	}
	r.stepLoads = pageTally{l2: 2, l3: 1}
	if r.servedFrom(step); j.violation != nil {
		t.Fatalf("hits as loaded: %v", j.violation)
	}
	for _, loads := range []pageTally{{l2: 1, l3: 2}, {l2: 3, l3: 0}, {l2: 2, l3: 0}} {
		j.violation, r.stepLoads = nil, loads
		want := fmt.Sprintf(
			"loaded back %d pages of the L2's bytes and %d of the L3's",
			loads.l2,
			loads.l3,
		)
		if r.servedFrom(step); j.violation == nil || !strings.Contains(j.violation.What, want) {
			t.Errorf("hits of 2 L2 and 1 L3 pages, %s: %v", want, j.violation)
		}
	}
	j.violation = nil
	slot := cache.SlabSlot{Slab: 0, Slot: 3}
	r.g.prefetched = map[partKey]uint64{{slab: 0, slot: 3, rank: 0}: 1}
	if r.loadedBack(&cache.Copy{Slots: []cache.SlabSlot{slot}}); r.stepLoads != (pageTally{l2: 0, l3: 1}) {
		t.Errorf(
			"a load-back of a prefetched slot: %+v, want one page of the L3's (servedFrom began the step anew)",
			r.stepLoads,
		)
	}
	r.g.prefetched[partKey{slab: 0, slot: 3, rank: 0}] = 1
	if r.recomputed(&cache.Fill{Slots: []cache.SlabSlot{slot}}); len(r.g.prefetched) != 1 {
		t.Errorf(
			"a Fill on a rank that has not started prefetch 1 (an older object on its slots) cleared its mark",
		)
	}
	r.lastPrefetch = 1
	r.recomputed(&cache.Fill{Slots: []cache.SlabSlot{slot}})
	if r.loadedBack(&cache.Copy{Slots: []cache.SlabSlot{slot}}); r.stepLoads != (pageTally{l2: 1, l3: 1}) {
		t.Errorf(
			"a load-back of a prefetched node recomputed since: %+v, want one more of the L2's",
			r.stepLoads,
		)
	}
}

// TestTheWriteThroughModelFails: under write_through, a block whole in a committed backup that no
// writer wrote is a violation; one that was written is not, and a block the backup holds only part
// of is not required.
func TestTheWriteThroughModelFails(t *testing.T) {
	j := writePolicyJob(t, cache.L3WriteThrough)
	g := j.groups[0]
	g.committedWhole(
		&cache.Audit{StartPos: 2, Tokens: []int32{3, 4, 5, 6, 7, 8, 9, 10, 11}},
	) // tokens 2..10
	if len(g.mustWrite) != 1 {
		t.Fatalf(
			"blocks whole in tokens 2..10 of 4-token blocks: %v, want the one of 4..7",
			g.mustWrite,
		)
	}
	if g.checkWritten(); j.violation == nil ||
		!strings.Contains(
			j.violation.What,
			"tokens 4..7 was whole in a committed backup and never written",
		) {
		t.Errorf("a block never written: %v", j.violation)
	}
	j.violation = nil
	g.wrote = map[uint64]bool{
		blockID(4, []int32{5, 6, 7, 8}): true,
	} // what written records of the block's write
	if g.checkWritten(); j.violation != nil {
		t.Errorf("a block written: %v", j.violation)
	}
}

// TestTheWriteBackModelFails: under write_back, a block write none of whose pages is in an object
// about to be evicted at its writer's last consensus is a violation; one with a page in such an
// object is not.
func TestTheWriteBackModelFails(t *testing.T) {
	j := writePolicyJob(t, cache.L3WriteBack)
	r := j.groups[0].ranks[0]
	w := &cache.BlockWrite{
		Seq:    1,
		Pages:  []cache.SlabSlot{{Slot: 3}, {Slot: 4}},
		Tokens: []int32{1, 2, 3, 4},
	}
	if r.writesBack(w); j.violation == nil ||
		!strings.Contains(j.violation.What, "none of its L2 objects is about to be evicted") {
		t.Errorf("a write_back write with no object near eviction: %v", j.violation)
	}
	j.violation = nil
	r.evictingSlots[cache.SlabSlot{Slot: 4}] = true
	if r.writesBack(w); j.violation != nil || j.models.WriteBacks != 1 {
		t.Errorf(
			"a write_back write of an object near eviction: %v, %d counted",
			j.violation,
			j.models.WriteBacks,
		)
	}
}

// TestWriteBackRequiresBlocksSpanningBackups: at the first pass that finds a backup about to go,
// every block through its pages whose every page is in a committed backup must be written, over the
// pages before it in its block and every continuation after it (writeback.go, pages named by
// served.go); a block with a page in no committed backup is not required.
func TestWriteBackRequiresBlocksSpanningBackups(t *testing.T) {
	j := writePolicyJob(t, cache.L3WriteBack)
	g, r := j.groups[0], j.groups[0].ranks[0]
	req := &workload.Request{
		InputIDs: []int32{1, 2, 3, 4, 5, 6, 7, 8},
	} // pages of 2 tokens, blocks of 2 pages
	r.serving(req)
	r.filled(&cache.Fill{DevicePages: []int32{0, 1, 2, 3}, Tokens: req.InputIDs, StartPos: 0})
	for page, obj := range []uint64{10, 11, 12, 13} { // each page backed up alone, into slot page
		r.copied(
			&cache.Copy{
				Gather:      true,
				Object:      obj,
				DevicePages: []int32{int32(page)},
				Slots:       []cache.SlabSlot{{Slot: int32(page)}},
			},
		)
	}
	block := func(from int) uint64 { return blockID(from, req.InputIDs[from:from+4]) }
	for _, c := range []struct {
		committed []uint64
		passes    uint64
		want      []uint64
	}{
		// tokens 0..3: the page before it in its block, in 10
		{[]uint64{10, 11, 12, 13}, 11, []uint64{block(0)}},
		// the page before it in no committed backup
		{[]uint64{11, 12, 13}, 11, nil},
		{[]uint64{10, 11, 12, 13}, 12, []uint64{block(4)}}, // tokens 4..7: the page after it, in 13
		{[]uint64{10, 11, 12}, 12, nil},
	} {
		g.mustWrite, g.passed = nil, nil
		g.mustWriteThrough(
			c.passes,
			g.committedPages(func(obj uint64) bool { return slices.Contains(c.committed, obj) }),
		)
		if got := slices.Sorted(maps.Keys(g.mustWrite)); !slices.Equal(
			got,
			slices.Sorted(slices.Values(c.want)),
		) {
			t.Errorf(
				"backups %v committed, %d about to go: blocks %v required, want %v",
				c.committed,
				c.passes,
				got,
				c.want,
			)
		}
	}
}

// writePolicyJob is the job the write models' tests build by hand: one CP group, no fault, pages of
// 2 tokens, L3 blocks of 4 written under policy.
func writePolicyJob(t *testing.T, policy cache.L3WritePolicy) *job {
	t.Helper()
	cfg := Draw(JobSeed(1, 0), 0, 0)
	cfg.Fault, cfg.DP, cfg.Geometry.PageTokens = FaultNone, 1, 2
	cfg.L3 = cache.L3Config{Enabled: true, BlockTokens: 4, WritePolicy: policy, BatchRequests: 1}
	j, err := newJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
