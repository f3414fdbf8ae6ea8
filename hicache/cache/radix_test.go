package cache

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cphicache/cphicache/pool"
)

func pageOf(base int32, pageTokens int) []int32 {
	p := make([]int32, pageTokens)
	for i := range p {
		p[i] = base*100 + int32(i)
	}
	return p
}

func seq(pageTokens int, bases ...int32) []int32 {
	var out []int32
	for _, b := range bases {
		out = append(out, pageOf(b, pageTokens)...)
	}
	return out
}

func TestWalkSplitsAtTheDivergingPage(t *testing.T) {
	const p = 4
	tree := newRadixTree(p)
	a := tree.newNode(tree.root, seq(p, 1, 2, 3, 4), 0)
	a.devicePages = []int32{10, 11, 12, 13}
	a.l2, a.l2Offset = pool.ObjectID(7), 0
	var splits int
	tree.onSplit = func(head, tail *treeNode) { splits++ }

	path := tree.walk(seq(p, 1, 2, 9), nil)
	if len(path) != 1 || len(path[0].tokens) != 2*p {
		t.Fatalf(
			"walk matched %d nodes, first of %d tokens; want one node of the 2 shared pages",
			len(path),
			len(path[0].tokens),
		)
	}
	head := path[0]
	if head.parent != tree.root || len(head.children) != 1 || head.children[0] != a ||
		a.parent != head {
		t.Fatal("split did not put the head between the root and the original node")
	}
	if got := head.devicePages; len(got) != 2 || got[0] != 10 || got[1] != 11 {
		t.Errorf("head device pages %v, want [10 11]", got)
	}
	if got := a.devicePages; len(got) != 2 || got[0] != 12 {
		t.Errorf("tail device pages %v, want [12 13]", got)
	}
	if head.l2 != 7 || head.l2Offset != 0 || a.l2 != 7 || a.l2Offset != 2 {
		t.Errorf(
			"L2 offsets head %d@%d tail %d@%d, want 7@0 and 7@2",
			head.l2,
			head.l2Offset,
			a.l2,
			a.l2Offset,
		)
	}
	if a.startPos != 2*p || head.startPos != 0 || splits != 1 {
		t.Errorf("start positions head %d tail %d, splits %d", head.startPos, a.startPos, splits)
	}
	// A full match walks through both halves without another split.
	if path := tree.walk(seq(p, 1, 2, 3, 4, 5), nil); len(path) != 2 || splits != 1 {
		t.Errorf("full walk: %d nodes, %d splits; want 2 and 1", len(path), splits)
	}
}

func TestWalkIgnoresPartialPages(t *testing.T) {
	const p = 4
	tree := newRadixTree(p)
	tree.newNode(tree.root, seq(p, 1, 2), 0)
	if path := tree.walk(seq(p, 1)[:p-1], nil); len(path) != 0 {
		t.Errorf("a partial page matched %d nodes", len(path))
	}
}

func TestRemoveAndForEachOrder(t *testing.T) {
	const p = 2
	tree := newRadixTree(p)
	a := tree.newNode(tree.root, seq(p, 1), 0)
	b := tree.newNode(tree.root, seq(p, 2), 0)
	c := tree.newNode(a, seq(p, 3), p)
	var order []uint64
	tree.forEach(func(n *treeNode) { order = append(order, n.id) })
	if len(order) != 3 || order[0] != a.id || order[1] != c.id || order[2] != b.id {
		t.Fatalf("depth-first order %v, want [%d %d %d]", order, a.id, c.id, b.id)
	}
	tree.remove(c)
	if len(a.children) != 0 || tree.nodes != 2 {
		t.Errorf("after remove: a has %d children, tree %d nodes", len(a.children), tree.nodes)
	}
	defer func() {
		if recover() == nil {
			t.Error("removing a node with children did not panic")
		}
	}()
	tree.newNode(a, seq(p, 4), p)
	tree.remove(a)
}

func TestOpQueueFrontierStopsAtTheFirstUnfinishedOp(t *testing.T) {
	var q opQueue
	if q.advance() != 0 {
		t.Fatal("empty queue frontier is not 0")
	}
	ops := make([]*copyOp, 4)
	for i := range ops {
		ops[i] = &copyOp{seq: uint64(2*i + 1)} // seqs 1 3 5 7: gaps belong to the other direction
		ops[i].isDone = false
		q.push(ops[i])
	}
	ops[1].isDone = true
	ops[2].isDone = true
	if f := q.advance(); f != 0 {
		t.Fatalf("frontier %d with op 1 unfinished, want 0", f)
	}
	ops[0].isDone = true
	if f := q.advance(); f != 5 {
		t.Fatalf("frontier %d, want 5 (op 7 unfinished)", f)
	}
	if got := q.retire(3); len(got) != 2 || len(q.ops) != 2 {
		t.Fatalf("retire(3) took %d ops, left %d", len(got), len(q.ops))
	}
	ops[3].isDone = true
	if f := q.advance(); f != 7 {
		t.Fatalf("frontier %d, want 7", f)
	}
	q.retire(7)
	if len(q.ops) != 0 || q.advance() != 7 {
		t.Error("drained queue is not idle at the last seq")
	}
}

func TestContentDependsOnEveryCoordinate(t *testing.T) {
	const tokenBytes = 16
	toks := []int32{5, 6}
	base := make([]byte, 2*tokenBytes)
	FillPart(base, toks, 32, tokenBytes, ContentKey{Seed: 1, Rank: 2, Layer: 3, Payload: 1})
	for name, k := range map[string]ContentKey{
		"seed": {Seed: 2, Rank: 2, Layer: 3, Payload: 1}, "rank": {Seed: 1, Rank: 3, Layer: 3, Payload: 1},
		"layer": {Seed: 1, Rank: 2, Layer: 4, Payload: 1}, "payload": {Seed: 1, Rank: 2, Layer: 3, Payload: 0},
	} {
		if PartMatches(base, toks, 32, tokenBytes, k) {
			t.Errorf("content does not change with the %s", name)
		}
	}
	if PartMatches(base, toks, 33, tokenBytes, ContentKey{Seed: 1, Rank: 2, Layer: 3, Payload: 1}) {
		t.Error("content does not change with the position")
	}
	if !PartMatches(
		base,
		toks,
		32,
		tokenBytes,
		ContentKey{Seed: 1, Rank: 2, Layer: 3, Payload: 1},
	) {
		t.Error("content is not reproducible")
	}
	// The check compares as it goes: a flip of any single byte, in any word, must be seen.
	for i := range base {
		base[i] ^= 0x10
		if PartMatches(
			base,
			toks,
			32,
			tokenBytes,
			ContentKey{Seed: 1, Rank: 2, Layer: 3, Payload: 1},
		) {
			t.Errorf("a flipped byte %d went unseen", i)
		}
		base[i] ^= 0x10
	}
	if PartMatches(
		base[:len(base)-8],
		toks,
		32,
		tokenBytes,
		ContentKey{Seed: 1, Rank: 2, Layer: 3, Payload: 1},
	) {
		t.Error("a short part matched")
	}
}

// TestMatchedAfterFirstPageIsThePageByPageWalk holds the walks' match of a node to the page-by-page
// loop it replaced, over nodes and requests of random lengths that differ at a random token, or
// nowhere.
func TestMatchedAfterFirstPageIsThePageByPageWalk(t *testing.T) {
	naive := func(node, tokens []int32, p int) int {
		matched := p
		for matched < len(node) && matched+p <= len(tokens) &&
			slices.Equal(node[matched:matched+p], tokens[matched:matched+p]) {
			matched += p
		}
		return matched
	}
	rng := rand.New(rand.NewPCG(3, 5))
	for range 20000 {
		p := 1 + rng.IntN(8)
		node := make([]int32, p*(1+rng.IntN(12)))
		for i := range node {
			node[i] = rng.Int32N(1 << 20)
		}
		tokens := append(slices.Clone(node[:p]), node[p:min(len(node), p+rng.IntN(len(node)+p))]...)
		for len(tokens) < p*(1+rng.IntN(14)) {
			tokens = append(tokens, rng.Int32N(1<<20))
		}
		if rng.IntN(3) > 0 && len(tokens) > p {
			tokens[p+rng.IntN(len(tokens)-p)] ^= 1 << rng.IntN(31)
		}
		if got, want := matchedAfterFirstPage(node, tokens, p), naive(node, tokens, p); got != want {
			t.Fatalf("page %d, node %v, tokens %v: matched %d, want %d", p, node, tokens, got, want)
		}
	}
}
