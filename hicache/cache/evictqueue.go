package cache

import "fmt"

// evictQueue is a min-heap of L1 eviction candidates in the order of `older` (lastAccess, then node
// id), so that an eviction pops its victims in O(log n) instead of walking and sorting the whole
// tree. The order is replicated state: every rank pops the same nodes, because pushes and pops
// follow the event stream.
//
// It is lazy: an entry is never updated or removed in place, so no missed update can corrupt the
// heap. Invariant (checked between steps in the tests, checkEvictQueue): every node that is
// evictableFromL1 is queued under its current key. The controller pushes a node at every change
// that can make it evictable: the step unlocks it (endStep; a hit changes the key only of a locked
// node), a copy unpins it (commit, releaseLoads), its child leaves the device (evictNode), it is a
// new leaf (computeRest); splits need nothing (noteSplit). Entries that went stale (the node was
// evicted, pruned, locked, pinned, got a child on the device, or was touched again) stay until
// popped, where they are checked and dropped or re-keyed: a stale entry costs one pop, never a
// wrong choice.
type evictQueue struct {
	tree    *radixTree // its node count bounds the heap (compact)
	entries []evictEntry

	// An eviction in progress chooses among the nodes evictable when it began, as a walk-and-sort
	// snapshot would: a parent whose last child on the device it evicted is held back until the
	// eviction ends (hold).
	evicting bool
	held     []*treeNode

	tieHigh bool // BugTieBreakOnRank on this rank: ties go to the higher node id

	// The last node the eviction in progress chose: each choice comes after it in the queue's
	// order.
	lastChosen evictEntry
}

// evictEntry is a node's key when it was pushed.
type evictEntry struct {
	lastAccess uint64
	id         uint64
	node       *treeNode
}

// compactSlackEntries keeps a small tree from compacting its heap on every few pushes.
const compactSlackEntries = 64

func newEvictQueue(tree *radixTree) *evictQueue { return &evictQueue{tree: tree} }

// reset forgets every entry (the flush empties the tree).
func (q *evictQueue) reset() {
	q.entries, q.held, q.evicting = nil, nil, false
}

// push queues n under its current key, unless it is off the device (never a candidate) or already
// queued so.
func (q *evictQueue) push(n *treeNode) {
	if !n.inL1() || (n.queued && n.queuedAccess == n.lastAccess) {
		return
	}
	n.queued, n.queuedAccess = true, n.lastAccess
	q.entries = append(q.entries, evictEntry{lastAccess: n.lastAccess, id: n.id, node: n})
	q.up(len(q.entries) - 1)
	// Stale entries would otherwise pile up without bound: keep at most about two per node of the
	// tree.
	if len(q.entries) > 2*q.tree.nodes+compactSlackEntries {
		q.compact()
	}
}

// popOldest returns the oldest queued node that is evictable now, or nil. Entries it passes over
// are stale (dropped: a node that becomes evictable again is pushed again) or carry an outdated key
// (queued again under the current one, which is later, since the clock only grows).
func (q *evictQueue) popOldest(evictable func(*treeNode) bool) *treeNode {
	for len(q.entries) > 0 {
		e := q.popMin()
		n := e.node
		if !n.queued || n.queuedAccess != e.lastAccess {
			continue // superseded by a later push of the same node
		}
		n.queued = false
		if e.lastAccess != n.lastAccess {
			q.push(n)
			continue
		}
		if n.held || !evictable(n) {
			continue
		}
		if q.lastChosen.node != nil && q.lessEntry(&e, &q.lastChosen) {
			panic(
				q.broken(
					e,
					"L1 eviction chose node %d (last access %d) after node %d (last access %d): out of the queue's order",
					e.id,
					e.lastAccess,
					q.lastChosen.id,
					q.lastChosen.lastAccess,
				),
			)
		}
		if q.evicting {
			q.lastChosen = e
		}
		return n
	}
	return nil
}

// beginEviction and endEviction bracket one L1 eviction; endEviction queues the nodes it held back.
func (q *evictQueue) beginEviction() { q.evicting, q.lastChosen = true, evictEntry{} }

func (q *evictQueue) endEviction() {
	q.evicting = false
	for _, n := range q.held {
		n.held = false
		q.push(n)
	}
	clear(q.held)
	q.held = q.held[:0]
}

// childLeftL1 is told that a child of parent left the device, which may make parent evictable.
// During an eviction parent was not a candidate when it began (it had that child on the device), so
// it waits for the next one.
func (q *evictQueue) childLeftL1(parent *treeNode) {
	if parent == q.tree.root {
		return
	}
	if !q.evicting {
		q.push(parent)
		return
	}
	if !parent.held {
		parent.held = true
		q.held = append(q.held, parent)
	}
}

// compact drops superseded entries and those of nodes off the device, re-keys the rest, and
// rebuilds the heap.
func (q *evictQueue) compact() {
	kept := q.entries[:0]
	for _, e := range q.entries {
		n := e.node
		if !n.queued || n.queuedAccess != e.lastAccess {
			continue
		}
		if !n.inL1() {
			n.queued = false
			continue
		}
		n.queuedAccess, e.lastAccess = n.lastAccess, n.lastAccess
		kept = append(kept, e)
	}
	clear(q.entries[len(kept):]) // no dangling pointers to pruned nodes
	q.entries = kept
	for i := len(kept)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *evictQueue) less(i, j int) bool { return q.lessEntry(&q.entries[i], &q.entries[j]) }

func (q *evictQueue) lessEntry(a, b *evictEntry) bool {
	if a.lastAccess != b.lastAccess {
		return a.lastAccess < b.lastAccess
	}
	if q.tieHigh {
		return a.id > b.id
	}
	return a.id < b.id
}

func (q *evictQueue) swap(i, j int) { q.entries[i], q.entries[j] = q.entries[j], q.entries[i] }

func (q *evictQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

func (q *evictQueue) down(i int) {
	for {
		smallest, l, r := i, 2*i+1, 2*i+2
		if l < len(q.entries) && q.less(l, smallest) {
			smallest = l
		}
		if r < len(q.entries) && q.less(r, smallest) {
			smallest = r
		}
		if smallest == i {
			return
		}
		q.swap(i, smallest)
		i = smallest
	}
}

func (q *evictQueue) popMin() evictEntry {
	last := len(q.entries) - 1
	q.swap(0, last)
	e := q.entries[last]
	q.entries[last] = evictEntry{}
	q.entries = q.entries[:last]
	q.down(0)
	return e
}

// checkEvictQueue verifies the queue's invariant: every evictable node is queued under its current
// key.
func (c *Core) checkEvictQueue() error {
	var err error
	c.tree.forEach(func(n *treeNode) {
		if err == nil && c.evictableFromL1(n) && !(n.queued && n.queuedAccess == n.lastAccess) {
			err = fmt.Errorf(
				"node %d is evictable from L1 but not in the eviction queue under its key (last access %d)",
				n.id,
				n.lastAccess,
			)
		}
	})
	return err
}

// broken is a broken invariant of the queue, with a dump of its state around entry e.
func (q *evictQueue) broken(e evictEntry, format string, args ...any) string {
	return fmt.Sprintf("cache: broken invariant: "+format, args...) + fmt.Sprintf(
		"\neviction queue: %d entries for %d nodes, evicting %v, %d held back, tie-break high %v; entry %d (last access %d) of %s\n",
		len(
			q.entries,
		),
		q.tree.nodes,
		q.evicting,
		len(q.held),
		q.tieHigh,
		e.id,
		e.lastAccess,
		e.node.describe(),
	)
}
