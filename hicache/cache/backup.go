package cache

import (
	"slices"

	"github.com/cphicache/cphicache/pool"
)

// backup reserves an L2 object for the node and starts copying this rank's parts of it, layer by
// layer. A capacity miss evicts or skips inside the allocator, identically on every rank, with no
// communication.
func (c *Core) backup(n *treeNode) *copyOp {
	pages := n.pages(c.geometry().PageTokens)
	if n.l2 != 0 || len(n.devicePages) != pages || pages == 0 {
		panic(
			c.broken(
				"backup of %s: only a node whole in L1 and not in the L2 is backed up",
				n.describe(),
			),
		)
	}
	if pages > c.geometry().Slots {
		// An object larger than the whole L2 can never fit: a miss, decided the same way on every
		// rank.
		c.counters.ReserveMisses++
		return nil
	}
	c.nextSeq++
	seq := c.nextSeq
	obj := pool.ObjectID(seq)
	var key uint64
	if c.geometry().Policy.Admits() { // computed only where a policy reads it: LRU pays nothing
		key = c.admissionKey(n)
	}
	outcome, err := c.alloc.ReserveAdmitted(obj, pages, seq, c.clock, key)
	if err != nil {
		panic(c.broken("reserve of %d pages for node %d: %v", pages, n.id, err))
	}
	c.dropEvicted()
	if outcome == pool.Miss || outcome == pool.Refused {
		// a refusal (--l2-policy admit_seen) counts with the capacity misses: no room was made
		c.counters.ReserveMisses++
		return nil
	}
	slots, err := c.slotsOf(obj, 0, len(n.devicePages))
	if err != nil {
		panic(c.broken("placement of fresh object %d: %v", obj, err))
	}
	n.l2, n.l2Offset = obj, 0
	c.objectNodes[obj] = []*treeNode{n}
	op := &copyOp{
		seq:         seq,
		obj:         obj,
		node:        n,
		tokens:      n.tokens,
		startPos:    n.startPos,
		devicePages: slices.Clone(n.devicePages),
		slots:       slots,
		key:         key,
	}
	if len(slots) != pages {
		panic(c.broken("backup of %s: %d slots for %d pages", n.describe(), len(slots), pages))
	}
	c.dev.pin(op.devicePages)
	c.writes.push(op)
	c.startCopy(op, true)
	c.counters.BackupReserved++
	c.counters.BytesD2H += int64(pages) * c.pageBytesPerRank()
	return op
}

// noteSplit keeps the controller's indexes right when the tree splits a node: the head inherits the
// tail's locks, so it is recorded among the step's locked nodes as often, and released with them;
// and a head that points into L2 is indexed under its object.
//
// The eviction queue needs nothing here. The head is on the path of the request that split it, so
// it is locked and queued when the step unlocks it. The tail keeps its key, locks, children and pin
// state (a copy pins all of a node's pages). When a copy of the node before the split ends, only
// the tail is told (commit), but the head still has the tail on the device below it, so it becomes
// a candidate only when the tail leaves (childLeftL1).
func (c *Core) noteSplit(head, tail *treeNode) {
	for i := 0; i < tail.lockRefs; i++ {
		c.work.locked = append(c.work.locked, head)
	}
	if head.l2 != 0 {
		c.objectNodes[head.l2] = append(c.objectNodes[head.l2], head)
	}
}

// admissionKey names a node's content for the L2's admission policy (pool's ReserveAdmitted): the
// hash of its path's tokens from the root through the node's first page, AdmissionKey of those
// tokens. Children are told apart by their first page, so that path names the tree's edge itself:
// the same key whatever the node's length, before and after a split (a head keeps its first
// page), and again when the same content comes back as a new node after the old was pruned.
// Every rank holds the same tree, so every rank computes the same key.
func (c *Core) admissionKey(n *treeNode) uint64 {
	var path []*treeNode
	for m := n.parent; m != c.tree.root; m = m.parent {
		path = append(path, m)
	}
	h := admissionSeed
	for i := len(path) - 1; i >= 0; i-- {
		h = admissionHash(h, path[i].tokens)
	}
	return admissionHash(h, n.tokens[:c.geometry().PageTokens])
}

// admissionSeed starts every admission key ("admit").
const admissionSeed uint64 = 0x61646d6974

// admissionHash chains tokens into h one at a time, so that hashing a path in pieces equals
// hashing it whole.
func admissionHash(h uint64, tokens []int32) uint64 {
	for _, t := range tokens {
		h = pool.Mix64(h ^ uint64(uint32(t)))
	}
	return h
}

// AdmissionKey is a node's admission key from its path's tokens, from the root through its first
// page (admissionKey), for models that hold their tree in another shape (the simulator's).
func AdmissionKey(pathTokens []int32) uint64 { return admissionHash(admissionSeed, pathTokens) }
