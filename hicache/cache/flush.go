package cache

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/pool"
)

// flush (DESIGN.md, "Invariants" 7): drain every copy in flight, meet the group in the flush
// consensus (a barrier: no rank leaves it before every rank is idle), settle the L3 I/O the flush's
// own commit started, assert placement there and object by object before anything is reset, then
// reset the radix tree, the queues and the allocator, and check the result against a fresh cache. A
// divergence is never forgiven by a flush.
func (c *Core) flush(recordObjects bool) error {
	a, err := c.agree(FlushConsensus, true, true)
	if err != nil {
		return err
	}
	if err := c.settle(FlushConsensus, a, true); err != nil {
		return err
	}
	if err := c.comparePlacements(recordObjects); err != nil {
		return err
	}
	c.reset()
	return nil
}

// recover is validate's flush after a recorded divergence: the same drain, barrier and settling,
// with the digests known to differ, then the reset. The group carries on from a fresh state.
func (c *Core) recover() error {
	a, err := c.agree(FlushConsensus, true, false)
	if err == nil {
		err = c.settle(FlushConsensus, a, false)
	}
	if err != nil && !errors.As(err, new(*DivergenceError)) {
		return err
	}
	c.reset()
	return nil
}

// settle is the one rule for letting go of the L2 wholesale (a flush's reset, the end of the run):
// a slot is freed only once the group has agreed that no block write or read still references it,
// on any rank. A drain's consensus agrees the copies, but its own commit can schedule block writes
// after its vote (write_through writes what it commits), and a write is done on its writer rank
// alone: a rank that reset at once would back up new KV into slots the writer is still reading. So
// while the agreed storage or prefetch frontier is short of the last write or prefetch scheduled
// (replicated counts), every rank waits for its own L3 I/O and the group meets again. The number of
// calls is decided from agreed and replicated values only, so every rank makes as many.
func (c *Core) settle(kind ConsensusKind, a agreement, checkDigest bool) error {
	t := c.l3
	if t == nil {
		return nil
	}
	if c.cfg.Testing.Bugs.has(BugFlushWaitsOnlyOnWriter) {
		// the bug: reset waits for this rank's own I/O, after the last collective, not for the
		// group's
		return nil
	}
	// Each round drains every rank's I/O and resolves at least one prefetch (the agreed frontier
	// holds at most one failed prefetch, so failed reads resolve one a round); a write scheduled by
	// a round's commit needs one more.
	maxRounds := len(t.reads) + 2
	for rounds := 0; a.storeFrontier < t.lastSeq.write || a.prefetchFrontier < t.lastSeq.read; rounds++ {
		if rounds > maxRounds {
			return fmt.Errorf(
				"%s of CP group %d at step %d: the L3 I/O did not settle after %d consensus rounds (storage frontier %d of %d, prefetch frontier %d of %d)",
				kind,
				c.cfg.Group,
				c.step,
				rounds,
				a.storeFrontier,
				t.lastSeq.write,
				a.prefetchFrontier,
				t.lastSeq.read,
			)
		}
		if kind == FlushConsensus && a.storeFrontier < t.lastSeq.write {
			c.counters.L3FlushSettles++
		}
		var err error
		if a, err = c.agree(kind, true, checkDigest); err != nil {
			return err
		}
	}
	return nil
}

// reset empties the cache and checks that it now equals a fresh one. A cache unlike a fresh one is
// this rank's failure (its group learns it in the next consensus), or in validate only a count in
// the flush_reset row.
func (c *Core) reset() {
	if len(c.inFlight) != 0 {
		panic(
			c.broken(
				"a reset with %d copies in flight: the drain consensus before it waits for every one",
				len(c.inFlight),
			),
		)
	}
	if c.l3 != nil && c.cfg.Testing.Bugs.has(BugFlushWaitsOnlyOnWriter) {
		if err := c.env.Wait(waitFlushL3IO, c.l3.idle); err != nil {
			c.fail(FailureInvariant, err)
		}
	}
	if c.l3 != nil && !c.l3.idle() {
		// settle agreed every L3 operation done on every rank: this rank's own must be.
		c.fail(
			FailureInvariant,
			fmt.Errorf(
				"step %d: a flush's reset found this rank's L3 I/O still in flight after the group agreed it done",
				c.step,
			),
		)
	}
	c.tree.reset()
	// The step's locks go with the tree: a flush event in a step that first served the requests
	// kept waiting for their L3 prefetch holds their nodes locked, and unlocking them after the
	// reset would queue those dead nodes, still holding device pages that new nodes now own, for a
	// later eviction to free a second time.
	c.work.locked = c.work.locked[:0]
	c.evictq.reset()
	if !c.cfg.Testing.Bugs.has(BugResetKeepsDevicePages) {
		c.dev.reset()
	}
	// the simulator's reset_keeps_free_bitmap bug breaks it in pool (BreakResetForTest)
	c.alloc.Reset()
	clear(c.objectNodes)
	if c.l3 != nil {
		c.l3.reset(c)
	}
	c.writes.ops, c.loads.ops, c.auditHeld = c.writes.ops[:0], c.loads.ops[:0], c.auditHeld[:0]
	c.counters.Flushes++
	if err := c.checkFresh(); err != nil {
		c.counters.FlushWrong++
		if !c.cfg.RecordFlushWrong {
			c.fail(FailureFlush, err)
			return
		}
		// validate goes on from a rebuilt allocator, so that the other rows still check something.
		alloc, err := pool.New(c.geometry())
		if err != nil {
			c.fail(FailureAllocator, err)
			return
		}
		c.alloc = alloc
	}
}

// checkFresh compares the whole cache with a freshly built one: the allocator by its state hash,
// computed by walking the free bitmap, the object table and the LRU (not by reading fields that
// Reset assigns), and the tree and the device pool by what they hold.
func (c *Core) checkFresh() error {
	if got := c.alloc.StateHash(); got != c.freshStateHash {
		return fmt.Errorf(
			"after the flush the allocator's state hash is %016x, a fresh allocator's %016x (%d of %d slots free, %d objects)",
			got,
			c.freshStateHash,
			c.alloc.FreeSlots(),
			c.geometry().Slots,
			c.alloc.Objects(),
		)
	}
	if c.tree.nodes != 0 || c.dev.available() != c.dev.capacity() {
		return fmt.Errorf(
			"after the flush the radix tree holds %d nodes and %d of %d device pages are free",
			c.tree.nodes,
			c.dev.available(),
			c.dev.capacity(),
		)
	}
	return nil
}
