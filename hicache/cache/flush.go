package hicache

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/pool"
)

// flush (design section 7): drain every copy in flight, meet the group in the flush consensus (a barrier: no rank
// leaves it before every rank is idle), assert placement there and object by object before anything is reset,
// then reset the radix tree, the queues and the allocator, and check the result against a fresh cache. A
// divergence is never forgiven by a flush.
func (c *controller) flush(recordObjects bool) error {
	if _, err := c.agree(FlushConsensus, true, true); err != nil {
		return err
	}
	if err := c.comparePlacements(recordObjects); err != nil {
		return err
	}
	c.reset()
	return nil
}

// recover is validate's flush after a recorded divergence: the same drain and barrier, with the digests known to
// differ, then the reset. The group carries on from a fresh state.
func (c *controller) recover() error {
	_, err := c.agree(FlushConsensus, true, false)
	if err != nil && !errors.As(err, new(*DivergenceError)) {
		return err
	}
	c.reset()
	return nil
}

// reset empties the cache and checks that it now equals a fresh one. A cache unlike a fresh one is this rank's
// failure (its group learns it in the next consensus), or in validate only a count in the flush_reset row.
func (c *controller) reset() {
	if c.l3 != nil {
		// The flush's own commit may have scheduled block writes: they read slots the reset is about to free.
		c.waitLocal("L3 drain", "an L3 write on this rank did not finish", c.l3.idle)
	}
	c.tree.reset()
	c.evictq.reset()
	c.dev.reset()
	c.alloc.Reset()
	clear(c.objectNodes)
	if c.l3 != nil {
		c.l3.reset()
	}
	c.writes.ops, c.loads.ops, c.auditHeld = c.writes.ops[:0], c.loads.ops[:0], c.auditHeld[:0]
	c.counters.Flushes++
	if err := c.checkFresh(); err != nil {
		c.counters.FlushWrong++
		if !c.recordFlushWrong {
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

// checkFresh compares the whole cache with a freshly built one: the allocator by its state hash, computed by
// walking the free bitmap, the object table and the LRU (not by reading fields that Reset assigns), and the tree
// and the device pool by what they hold.
func (c *controller) checkFresh() error {
	if got := c.alloc.StateHash(); got != c.freshStateHash {
		return fmt.Errorf("after the flush the allocator's state hash is %016x, a fresh allocator's %016x (%d of %d slots free, %d objects)",
			got, c.freshStateHash, c.alloc.FreeSlots(), c.geometry().Slots, c.alloc.Objects())
	}
	if c.tree.nodes != 0 || c.dev.available() != c.dev.capacity() {
		return fmt.Errorf("after the flush the radix tree holds %d nodes and %d of %d device pages are free",
			c.tree.nodes, c.dev.available(), c.dev.capacity())
	}
	return nil
}
