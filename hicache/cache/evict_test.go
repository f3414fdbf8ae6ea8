package cache

import (
	"fmt"
	"slices"
	"testing"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// The eviction queue against its model: the walk-and-sort eviction it replaced. Every L1 eviction
// of the SPMD run tests (smallOptions) and of the fuzz target below is compared with it, choice by
// choice.

func TestCompareEvictionCatchesEveryKindOfDeparture(t *testing.T) {
	a, b, c := &treeNode{id: 1}, &treeNode{id: 2}, &treeNode{id: 3}
	model := []*treeNode{a, b, c}
	cases := []struct {
		name        string
		chosen      []*treeNode
		freed, need int
		wantErr     bool
	}{
		{"prefix, enough freed", []*treeNode{a, b}, 2, 2, false},
		{"all, not enough freed", []*treeNode{a, b, c}, 3, 5, false},
		{"swapped", []*treeNode{b, a}, 2, 2, true},
		{"skipped one", []*treeNode{a, c}, 2, 2, true},
		{"stopped early", []*treeNode{a}, 1, 2, true},
		{"one too many", []*treeNode{a, b, c, {id: 4}}, 4, 9, true},
	}
	for _, tc := range cases {
		if err := compareEviction(model, tc.chosen, tc.freed, tc.need); (err != nil) != tc.wantErr {
			t.Errorf("%s: %v, want an error %v", tc.name, err, tc.wantErr)
		}
	}
}

const testOpPageTokens = 2

// newTestController is a one-rank cache with tiny pages, checked against the eviction model.
func newTestController(t testing.TB, policy WritePolicy, devicePages, l2Slots int) *Core {
	t.Helper()
	g := pool.Geometry{
		CPSize:           1,
		Layers:           1,
		PayloadsPerLayer: 1,
		PageTokens:       testOpPageTokens,
		TokenBytes:       8,
		Slots:            l2Slots,
		SlabBytesMax:     1 << 20,
		Layout:           pool.LayerFirst,
	}
	return newSolo(
		t,
		Config{
			Geometry:    g,
			DevicePages: devicePages,
			Policy:      policy,
			Seed:        3,
			Testing:     Testing{CheckEvictions: true},
		},
	)
}

// testOps drives a controller with operations decoded from bytes: requests whose pages come from a
// three-letter alphabet (so prefixes are shared, nodes split and L1 fills), step ends with or
// without the consensus (pins that outlive a step), and flushes. Every consensus drains, so the run
// does not depend on copy timing.
func testOps(t testing.TB, c *Core, ops []byte) {
	t.Helper()
	for i := 0; i < len(ops); i++ {
		switch op := ops[i]; op % 8 {
		case 5:
			endTestStep(t, c, true)
		case 6:
			endTestStep(t, c, false)
		case 7:
			endTestStep(t, c, true)
			if op>>3%8 != 0 { // flushes are rarer, or the cache never fills
				break
			}
			if err := c.flush(false); err != nil {
				t.Fatal(err)
			}
		default:
			pages := 1 + int(op>>3)%6
			tokens := make([]int32, 0, pages*testOpPageTokens)
			for p := 0; p < pages && i+1 < len(ops); p++ {
				i++
				letter := int32(ops[i] % 3)
				tokens = append(tokens, letter, letter)
			}
			req := requestOf(tokens)
			if err := c.serve(&req); err != nil {
				t.Fatal(err)
			}
		}
		if c.failure != nil {
			t.Fatalf("op %d: %v", i, c.failure)
		}
	}
	endTestStep(t, c, true)
}

// endTestStep ends a step as the run does: unlock, check the invariants (the queue's among them),
// and agree.
func endTestStep(t testing.TB, c *Core, agree bool) {
	t.Helper()
	c.endStep()
	if err := c.checkStepInvariants(); err != nil {
		t.Fatal(err)
	}
	if agree {
		if _, err := c.agree(StepConsensus, true, true); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEvictionQueueMatchesTheModel replays one sequence per policy with enough evictions to cover
// holding back parents, write_back's backup on eviction, pins that outlive a step, splits and a
// flush.
func TestEvictionQueueMatchesTheModel(t *testing.T) {
	ops := make([]byte, 0, 4000)
	x := uint32(12345)
	for range cap(ops) {
		x = x*1664525 + 1013904223
		ops = append(ops, byte(x>>24))
	}
	for _, policy := range []WritePolicy{WriteThrough, WriteThroughSelective, WriteBack} {
		c := newTestController(t, policy, 24, 40)
		compared := 0
		c.evictionModel = func(c *Core) evictionCheck {
			compared++
			return walkEvictionModel(c)
		}
		testOps(t, c, ops)
		if compared < 100 || c.counters.L1Evictions < 100 || c.counters.Flushes == 0 {
			t.Errorf(
				"%v: %d evictions compared, %d L1 evictions, %d flushes: the sequence exercises too little",
				policy,
				compared,
				c.counters.L1Evictions,
				c.counters.Flushes,
			)
		}
	}
}

// TestEvictionModelCatchesAQueueThatMissedANode: a node dropped from the queue is caught by the
// queue's invariant between steps and, at the next eviction, by the comparison with the model.
func TestEvictionModelCatchesAQueueThatMissedANode(t *testing.T) {
	c := newTestController(t, WriteThroughSelective, 8, 40)
	for _, letter := range []int32{0, 1, 2} {
		req := requestOf([]int32{letter, letter})
		if err := c.serve(&req); err != nil {
			t.Fatal(err)
		}
	}
	endTestStep(t, c, true)
	oldest := naiveEvictionOrder(c)[0]
	oldest.queued = false // as if a push had been missed: its entry is superseded
	if err := c.checkStepInvariants(); err == nil {
		t.Error("the step invariants missed a node absent from the queue")
	}
	req := requestOf(seq(testOpPageTokens, 5, 6, 7, 8, 9, 10))
	if err := c.serve(&req); err != nil {
		t.Fatal(err)
	}
	if c.failure == nil {
		t.Error("the eviction model missed an eviction that skipped the oldest node")
	}
}

// FuzzEvictionQueueAgainstModel: no sequence of requests, step ends and flushes makes the queue
// choose otherwise than the model. Run it with `go test ./hicache/cache -run '^$' -fuzz
// FuzzEvictionQueueAgainstModel -fuzztime 30s`.
func FuzzEvictionQueueAgainstModel(f *testing.F) {
	f.Add(
		byte(0),
		byte(8),
		[]byte{0, 1, 2, 0, 40, 1, 1, 2, 0, 5, 48, 0, 0, 0, 0, 0, 0, 6, 16, 2, 2, 2, 7},
	)
	f.Add(
		byte(2),
		byte(4),
		[]byte{40, 0, 1, 2, 0, 1, 2, 6, 40, 0, 1, 2, 1, 1, 1, 5, 40, 2, 2, 2, 0, 0, 0},
	)
	f.Fuzz(func(t *testing.T, policy, devicePages byte, ops []byte) {
		if len(ops) > 2000 {
			ops = ops[:2000]
		}
		c := newTestController(t, WritePolicy(policy%3), 2+int(devicePages%30), 24)
		testOps(t, c, ops)
	})
}

func requestOf(tokens []int32) workload.Request { return workload.Request{InputIDs: tokens} }

// TestEvictQueueStaysBoundedAndOrdered: touching nodes again and again leaves stale entries behind;
// the heap stays within its bound, and pops come out in (lastAccess, id) order with every stale
// entry skipped.
func TestEvictQueueStaysBoundedAndOrdered(t *testing.T) {
	tree := newRadixTree(1)
	q := newEvictQueue(tree)
	var nodes []*treeNode
	for i := range 10 {
		n := tree.newNode(tree.root, []int32{int32(i)}, 0)
		n.devicePages = []int32{int32(i)}
		nodes = append(nodes, n)
	}
	clock := uint64(0)
	for round := range 100 {
		for i, n := range nodes {
			if (round+i)%3 == 0 { // touch some: their earlier entries go stale
				clock++
				n.lastAccess = clock
			}
			q.push(n)
		}
		if bound := 2*tree.nodes + compactSlackEntries; len(q.entries) > bound {
			t.Fatalf(
				"round %d: %d entries for %d nodes, bound %d",
				round,
				len(q.entries),
				tree.nodes,
				bound,
			)
		}
	}
	// Touched without a push (re-keyed at pop, to a later key since the clock only grows), and
	// tied.
	nodes[6].lastAccess, nodes[4].lastAccess = clock+1, clock+1
	want := slices.Clone(nodes)
	slices.SortFunc(want, func(a, b *treeNode) int {
		if older(a, b) {
			return -1
		}
		return 1
	})
	var got []*treeNode
	every := func(*treeNode) bool { return true }
	for n := q.popOldest(every); n != nil; n = q.popOldest(every) {
		got = append(got, n)
	}
	if !slices.Equal(got, want) {
		t.Errorf("popped %v, want %v", ids(got), ids(want))
	}
}

func ids(nodes []*treeNode) []uint64 {
	out := make([]uint64, len(nodes))
	for i, n := range nodes {
		out[i] = n.id
	}
	return out
}

// BenchmarkEvictL1FromAFullCache serves requests that each evict one leaf from a full L1 of `pages`
// pages, in a tree of three levels (so that no node's fan-out, searched linearly, grows fast):
// ns/op should not grow with the cache's size. `go test ./hicache/cache -run '^$' -bench EvictL1`.
func BenchmarkEvictL1FromAFullCache(b *testing.B) {
	for _, pages := range []int{1 << 10, 1 << 13, 1 << 16} {
		b.Run(fmt.Sprintf("pages=%d", pages), func(b *testing.B) {
			c := newTestController(
				b,
				WriteThroughSelective,
				pages,
				16,
			) // no backups: nothing pinned
			c.evictionModel = nil
			fanOut := int32(2)
			for fanOut*fanOut*fanOut < int32(pages) {
				fanOut++
			}
			next := int32(0)
			serveLeaf := func() {
				next++
				a, b2, leaf := next%fanOut, next/fanOut%fanOut, next
				req := requestOf([]int32{a, a, b2, b2, leaf, leaf})
				if err := c.serve(&req); err != nil {
					b.Fatal(err)
				}
				c.endStep()
			}
			for c.dev.available() > 0 {
				serveLeaf()
			}
			b.ResetTimer()
			for range b.N {
				serveLeaf()
			}
			b.StopTimer()
			if c.counters.L1Evictions == 0 {
				b.Fatal("no eviction")
			}
		})
	}
}

// TestOnlyRequestsLongerThanL1CountAsOversize: a request with more whole pages than L1 holds is
// computed and not cached, counted as oversize; one that fits but finds L1's pages locked by the
// step is uncached, not oversize.
func TestOnlyRequestsLongerThanL1CountAsOversize(t *testing.T) {
	c := newTestController(t, WriteThrough, 4, 64)
	long := requestOf(tokensOf(1, 5*testOpPageTokens)) // 5 pages, L1 holds 4
	if err := c.serve(&long); err != nil {
		t.Fatal(err)
	}
	if got := c.counters; got.Uncached != 5 || got.UncachedOversize != 5 {
		t.Fatalf(
			"a 5-page request in a 4-page L1: %d uncached, %d oversize; want 5 and 5",
			got.Uncached,
			got.UncachedOversize,
		)
	}
	first, second := requestOf(
		tokensOf(100, 3*testOpPageTokens),
	), requestOf(
		tokensOf(200, 3*testOpPageTokens),
	)
	// locked by the step: the second request cannot evict it
	if err := c.serve(&first); err != nil {
		t.Fatal(err)
	}
	if err := c.serve(&second); err != nil {
		t.Fatal(err)
	}
	if got := c.counters; got.Uncached != 8 || got.UncachedOversize != 5 {
		t.Errorf(
			"a 3-page request beside a locked 3-page one: %d uncached, %d oversize; want 8 and 5",
			got.Uncached,
			got.UncachedOversize,
		)
	}
}

func tokensOf(base int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}
