package cache

import (
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/pool"
)

// Writing blocks to the L3. A block is the tokens [k*B, (k+1)*B) of a path from the root; it may
// lie in several tree nodes and so in several L2 objects. It is written once all of them are
// committed (the write_through policy looks when an object commits, write_back when the L2 is about
// to evict one), by the rank k mod cp, which reads every rank's parts from the shared slab; on a
// group over several nodes, by the rank of each node whose node-local part is k mod the node's
// parts, which writes its node's part-file from its node's slab. Its L2 objects stay protected
// until the group agrees the write is done (the storage frontier), so no slot is reused under the
// writer.

// l3Committed is the write_through policy's hook: a backup just committed, so blocks through its
// nodes may now be whole in L2.
func (c *Core) l3Committed(obj pool.ObjectID) {
	if c.l3 == nil ||
		(c.l3.cfg.WritePolicy != L3WriteThrough && !c.cfg.Testing.Bugs.has(BugWriteBackAtCommit)) {
		return
	}
	for _, n := range c.objectNodes[obj] {
		c.scheduleBlocksThrough(n)
	}
}

// l3WriteBackNearEviction is the write_back policy's: when the L2's free slots fall below an eighth
// of it, the committed objects the next reservations would evict first (as many pages as that
// eighth) get their blocks written, once each. Writing at the eviction itself is not possible:
// Reserve gives the slots to the new object at once, and its copies would race the writer.
func (c *Core) l3WriteBackNearEviction() {
	t := c.l3
	if t == nil || t.cfg.WritePolicy != L3WriteBack {
		return
	}
	watermark := max(c.geometry().Slots/8, t.blockPages())
	if c.alloc.FreeSlots() >= watermark {
		return
	}
	for _, obj := range c.alloc.OldestEvictable(watermark, nil) {
		if t.backedUp[obj] {
			continue
		}
		t.backedUp[obj] = true
		c.counters.L3WriteBackEvicts++
		for _, n := range c.objectNodes[obj] {
			c.scheduleBlocksThrough(n)
		}
		if c.cfg.Testing.Bugs.has(BugWriteBackOldestOnly) {
			// the bug: only the oldest object's blocks, though the next reservations evict the
			// others too
			break
		}
	}
}

// scheduleBlocksThrough schedules every block that overlaps node n and is whole in committed L2:
// those that end in n, and those that continue into its descendants.
func (c *Core) scheduleBlocksThrough(n *treeNode) {
	B := c.l3.blockTokens()
	start, end := n.startPos, n.startPos+len(n.tokens)
	// the path's chain keys up to n's last whole block: one pass for every block ending in n
	var keys []uint64
	keyIn := func(blockEnd int) func() uint64 {
		return func() uint64 {
			if keys == nil {
				keys = c.pathKeys(n, end/B*B)
			}
			return keys[blockEnd/B-1]
		}
	}
	for blockEnd := (start/B + 1) * B; blockEnd-B < end; blockEnd += B {
		if blockEnd <= end {
			c.scheduleBlock(n, blockEnd, keyIn(blockEnd))
		} else {
			c.scheduleBlocksBelow(n, blockEnd)
		}
	}
}

// scheduleBlocksBelow follows n's children to the nodes where a block ending at blockEnd ends.
func (c *Core) scheduleBlocksBelow(n *treeNode, blockEnd int) {
	for _, child := range n.children {
		if child.startPos+len(child.tokens) >= blockEnd {
			c.scheduleBlock(
				child,
				blockEnd,
				func() uint64 { keys := c.pathKeys(child, blockEnd); return keys[len(keys)-1] },
			)
		} else {
			c.scheduleBlocksBelow(child, blockEnd)
		}
	}
}

// blockSegment is a run of a block's pages in one L2 object.
type blockSegment struct {
	obj              pool.ObjectID
	firstPage, pages int
}

// scheduleBlock schedules the block that ends at blockEnd inside node m, when every page of it is
// in committed L2. The group does not remember what it stored: a block may have been evicted (by
// this group's budget or another job's) or found corrupt since, so its writer looks at the
// directory instead (write).
func (c *Core) scheduleBlock(m *treeNode, blockEnd int, keyOf func() uint64) {
	t := c.l3
	segs, ok := c.blockSegments(m, blockEnd)
	if !ok {
		return
	}
	key := keyOf() // only for a block that can be written: the key hashes the whole path before it
	if t.writing(key) && !c.cfg.Testing.Bugs.has(BugL3WriteTwice) {
		// already on its way: a block over several tree nodes or L2 objects is reached from each of
		// them
		return
	}
	var pages []SlabSlot
	var objs []pool.ObjectID
	for i := len(segs) - 1; i >= 0; i-- { // segments were found from the end back
		s := segs[i]
		slots, err := c.slotsOf(s.obj, s.firstPage, s.pages)
		if err != nil {
			c.fail(FailureInvariant, fmt.Errorf("L3 block ending at token %d: %w", blockEnd, err))
			return
		}
		pages = append(pages, slots...)
		if !slices.Contains(objs, s.obj) {
			objs = append(objs, s.obj)
		}
	}
	if len(objs) > 1 && t.cfg.WritePolicy == L3WriteBack &&
		c.cfg.Testing.Bugs.has(BugWriteBackOneObject) {
		// the bug: write_back's pass writes only the blocks whole in one object, as if each object
		// stood alone
		return
	}
	if !(c.cfg.Testing.Bugs.has(BugNoWriteBackProtect) && t.cfg.WritePolicy == L3WriteBack) {
		for _, obj := range objs {
			if err := c.alloc.Protect(obj); err != nil {
				panic(c.broken("protect committed L2 object %d for an L3 write: %v", obj, err))
			}
		}
	} else {
		objs = nil // the bug: nothing to unprotect later either
	}
	t.lastSeq.write++
	w := &l3Write{seq: t.lastSeq.write, key: key, objs: objs}
	t.writes = append(t.writes, w)
	B := t.blockTokens()
	if t.ownsBlock(blockEnd/B - 1) {
		c.env.Start(
			&BlockWrite{
				Seq:      w.seq,
				Key:      key,
				Pages:    pages,
				Tokens:   c.pathTokens(m, blockEnd-B, blockEnd),
				StartPos: blockEnd - B,
			},
		)
	} else {
		w.done = true // not this rank's block
	}
}

// writing says whether a write of the block key is scheduled and not yet retired (replicated: every
// rank holds every write). Scheduling it again would write the same file twice at once, for
// nothing.
func (t *l3Tier) writing(key uint64) bool {
	for _, w := range t.writes {
		if w.key == key {
			return true
		}
	}
	return false
}

// blockSegments finds the L2 pages of the block ending at blockEnd in node m, walking up to its
// start; ok is false when a node on the way has no committed L2 object.
func (c *Core) blockSegments(m *treeNode, blockEnd int) (segs []blockSegment, ok bool) {
	p := c.geometry().PageTokens
	blockStart := blockEnd - c.l3.blockTokens()
	pos := blockEnd
	for x := m; pos > blockStart; x = x.parent {
		if x == c.tree.root || x.l2 == 0 || !c.committed(x.l2) {
			return nil, false
		}
		lo := max(x.startPos, blockStart)
		segs = append(
			segs,
			blockSegment{
				obj:       x.l2,
				firstPage: x.l2Offset + (lo-x.startPos)/p,
				pages:     (pos - lo) / p,
			},
		)
		pos = lo
	}
	return segs, true
}

// pathKeys are the chain keys of every block of the path through node m up to end (a block boundary
// inside or at the end of m): each over every token of the path before it.
func (c *Core) pathKeys(m *treeNode, end int) []uint64 {
	tokens := make([]int32, end)
	for x := m; x != c.tree.root; x = x.parent {
		hi := min(x.startPos+len(x.tokens), end)
		copy(tokens[x.startPos:hi], x.tokens[:hi-x.startPos])
	}
	return chainKeys(tokens, c.l3.blockTokens(), end/c.l3.blockTokens(), nil)
}

// chainKeys appends the keys of the first blocks blocks of tokens.
func chainKeys(tokens []int32, blockTokens, blocks int, into []uint64) []uint64 {
	var key uint64
	for k := 0; k < blocks; k++ {
		key = l3block.ChainKey(key, tokens[k*blockTokens:(k+1)*blockTokens])
		into = append(into, key)
	}
	return into
}

// pathTokens are the tokens [from, to) of the path from the root through node m (to <= m's end).
func (c *Core) pathTokens(m *treeNode, from, to int) []int32 {
	tokens := make([]int32, to-from)
	for x := m; x != c.tree.root && x.startPos+len(x.tokens) > from; x = x.parent {
		lo, hi := max(x.startPos, from), min(x.startPos+len(x.tokens), to)
		if lo < hi {
			copy(tokens[lo-from:hi-from], x.tokens[lo-x.startPos:hi-x.startPos])
		}
	}
	return tokens
}
