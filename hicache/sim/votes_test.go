package sim

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/hicache/workload"
)

// TestTheExistenceVoteModelFails: a prefetch must read the MIN over its ranks of their leading runs
// of found blocks (votes.go), shifted to its first block and capped by the backlog's room: more is
// a violation, and so is fewer, which no other check sees.
func TestTheExistenceVoteModelFails(t *testing.T) {
	cfg := twoRankL3Config(64) // room for 64/8/2 = 4 blocks of unresolved prefetches
	ids := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}
	j, err := newJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j.blocks.learn([]workload.Event{{Request: workload.Request{InputIDs: ids}}}, &j.cfg)
	var keys []uint64 // blocks 0..4
	for k, key := 0, uint64(0); k < 5; k++ {
		key = l3block.ChainKey(key, ids[4*k:4*k+4])
		keys = append(keys, key)
	}
	g := j.groups[0]
	// Check 1 over blocks 0..4: rank 0 (blocks 0, 2, 4) found 0 and 2, not 4; rank 1 (blocks 1, 3)
	// found both.
	own := [][]uint64{{keys[0], keys[2], keys[4]}, {keys[1], keys[3]}}
	for cp, found := range []int{2, 2} {
		w := &cache.ExistenceCheck{Seq: 1, Keys: own[cp], FirstBlock: 0, Blocks: 5}
		g.checkStarted(w)
		g.ranks[cp].checkAnswered(w, found)
	}
	prefetch := func(seq uint64, block, blocks int) {
		g.ranks[0].prefetchNoticed(seq, false)
		g.ranks[0].readStarted(
			&cache.BlockRead{Prefetch: seq, Key: keys[block], Tokens: 4 * blocks, Check: 1},
		)
	}
	prefetch(1, 0, 4) // runs 4 and 5: MIN 4
	if g.checkVotes(); j.violation != nil {
		t.Fatalf("4 blocks, the MIN of the runs: %v", j.violation)
	}
	prefetch(
		2,
		1,
		1,
	) // from block 1: 3 found, but the first, unresolved, holds all 4 blocks of room
	if g.checkVotes(); j.violation == nil ||
		!strings.Contains(j.violation.What, "the model says 0") {
		t.Errorf("a prefetch with no room left: %v", j.violation)
	}
	g.ranks[0].prefetchNoticed(1, true)
	for blocks, want := range map[int]string{2: "the model says 3", 4: "the model says 3"} {
		j.violation, g.started, g.unresolved = nil, nil, nil
		prefetch(3, 1, blocks)
		if g.checkVotes(); j.violation == nil || !strings.Contains(j.violation.What, want) {
			t.Errorf("%d blocks from block 1, where 3 were found: %v", blocks, j.violation)
		}
	}
	j.violation, g.started, g.unresolved = nil, nil, nil
	prefetch(4, 1, 3)
	if g.checkVotes(); j.violation != nil {
		t.Errorf("3 blocks from block 1, the MIN shifted: %v", j.violation)
	}
}

// TestTheCheckSpanFails: an existence check's span must run from its first block to its prompt's
// last whole block or to the prefetch cap, each block looked for once (a node); one cut short is a
// violation.
func TestTheCheckSpanFails(t *testing.T) {
	cfg := twoRankL3Config(8) // a cap of 8/2/2 = 2 blocks
	ids := []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}
	j, err := newJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j.blocks.learn([]workload.Event{{Request: workload.Request{InputIDs: ids}}}, &j.cfg)
	var keys []uint64 // blocks 0..2, the last the prompt's
	for k, key := 0, uint64(0); k < 3; k++ {
		key = l3block.ChainKey(key, ids[4*k:4*k+4])
		keys = append(keys, key)
	}
	g := j.groups[0]
	for i, c := range []struct {
		first, blocks int
		own           [2][]uint64
		ok            bool
	}{
		// blocks 1..2: to the prompt's end
		{1, 2, [2][]uint64{{keys[2]}, {keys[1]}}, true},
		{0, 2, [2][]uint64{{keys[0]}, {keys[1]}}, true},           // blocks 0..1: the cap
		{0, 1, [2][]uint64{{keys[0]}, nil}, false},                // block 0 alone: short of both
		{1, 2, [2][]uint64{{keys[2]}, nil}, false},                // block 1 looked for by nobody
		{1, 2, [2][]uint64{{keys[2]}, {keys[1], keys[2]}}, false}, // block 2 twice on one node
	} {
		j.violation, g.votes = nil, nil
		for cp := range 2 {
			g.checkStarted(
				&cache.ExistenceCheck{
					Seq:        1,
					Keys:       c.own[cp],
					FirstBlock: c.first,
					Blocks:     c.blocks,
				},
			)
		}
		if ok := g.checkSpan(1, g.votes[1]); ok != c.ok || ok != (j.violation == nil) {
			t.Errorf(
				"span %d (blocks %d..%d): ok %v, want %v: %v",
				i,
				c.first,
				c.first+c.blocks-1,
				ok,
				c.ok,
				j.violation,
			)
		}
	}
}

// twoRankL3Config is the job the model tests build by hand: one CP group of two ranks on one node,
// no fault, pages of 2 tokens, L3 blocks of 4, one request a batch, and slots L2 slots (which bound
// the prefetch room).
func twoRankL3Config(slots int) JobConfig {
	cfg := Draw(JobSeed(1, 0), 0, 0)
	cfg.Fault, cfg.DP, cfg.CP, cfg.Geometry.CPSize, cfg.Geometry.Nodes = FaultNone, 1, 2, 2, 1
	cfg.Geometry.PageTokens, cfg.Geometry.Slots = 2, slots
	cfg.L3 = cache.L3Config{Enabled: true, BlockTokens: 4, BatchRequests: 1}
	return cfg
}
