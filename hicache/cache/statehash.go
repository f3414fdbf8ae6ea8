package cache

import "github.com/cphicache/cphicache/pool"

// StateHash is a hash of this rank's replicated state: everything that must be equal on every rank
// of the group at the end of every step, because it is a function of the event stream and of agreed
// values alone. The allocator's tables (pool's StateHash, not only its digest), the radix tree's
// shape and every node's place in L1 and L2, the device pages' free list, the copies and L3 work
// not yet retired (by sequence number: when they finish is each rank's own), the logical clock and
// the replicated counters. The simulator compares it across the ranks of a group after every step.
func (c *Core) StateHash() uint64 {
	h := stateHasher{h: 0x5eed}
	h.add(
		c.alloc.StateHash(),
		c.alloc.Digest(),
		c.clock,
		c.nextSeq,
		uint64(c.step),
		uint64(c.tree.nodes),
	)
	c.tree.forEach(func(n *treeNode) {
		h.add(
			n.id,
			n.parent.id,
			uint64(n.startPos),
			uint64(len(n.tokens)),
			uint64(n.l2),
			uint64(n.l2Offset),
			n.lastAccess,
			uint64(n.hits),
			uint64(len(n.devicePages)),
			boolWord(n.fromL3),
		)
		for _, p := range n.devicePages {
			h.add(uint64(p))
		}
	})
	for _, p := range c.dev.free {
		h.add(uint64(p))
	}
	for _, q := range []*opQueue{&c.writes, &c.loads} {
		h.add(q.lastSeq, uint64(len(q.ops)))
		for _, op := range q.ops {
			h.add(op.seq, uint64(op.obj))
		}
	}
	for _, obj := range c.auditHeld {
		h.add(uint64(obj))
	}
	h.add(boolWord(c.drainNext), uint64(len(c.deferred)))
	if t := c.l3; t != nil {
		h.add(
			t.lastSeq.write,
			t.lastSeq.read,
			uint64(len(t.writes)),
			uint64(len(t.reads)),
			uint64(len(t.open)),
			uint64(len(t.backedUp)),
		)
		h.add(uint64(t.failStreak), uint64(t.resumeStep), boolWord(t.proven))
		for _, w := range t.writes {
			h.add(w.seq, w.key)
		}
		for _, p := range t.reads {
			h.add(
				p.seq,
				uint64(p.obj),
				uint64(len(p.keys)),
				boolWord(p.resolved),
				uint64(p.okBlocks),
			)
		}
	}
	for _, v := range c.counters.CounterFields("group") {
		h.add(uint64(*v))
	}
	return h.h
}

type stateHasher struct{ h uint64 }

func (s *stateHasher) add(words ...uint64) {
	for _, w := range words {
		s.h = pool.Mix64(s.h ^ w)
	}
}
