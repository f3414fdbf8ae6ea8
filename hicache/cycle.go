package hicache

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/cphicache/cphicache/pool"
)

// drainPollInterval is how long a rank waits between two frontier all-reduces while it drains copies: long
// enough to let the copy worker run on an oversubscribed node, short next to a page copy.
const drainPollInterval = 50 * time.Microsecond

// backup reserves an L2 object for the node and starts copying this rank's parts of it, layer by layer. A
// capacity miss evicts or skips inside the allocator, identically on every rank, with no communication.
func (c *controller) backup(n *treeNode) *copyOp {
	pages := n.pages(c.geometry().PageTokens)
	if pages > c.geometry().Slots {
		// An object larger than the whole L2 can never fit: a miss, decided the same way on every rank.
		c.counters.ReserveMisses++
		return nil
	}
	c.nextSeq++
	seq := c.nextSeq
	obj := pool.ObjectID(seq)
	outcome, err := c.alloc.Reserve(obj, pages, seq, c.clock)
	if err != nil {
		panic(fmt.Sprintf("hicache: reserve of %d pages for node %d: %v", pages, n.id, err))
	}
	c.dropEvicted()
	if outcome == pool.Miss {
		c.counters.ReserveMisses++
		return nil
	}
	spans, err := c.spansFor(obj, 0, n.devicePages)
	if err != nil {
		panic(fmt.Sprintf("hicache: placement of fresh object %d: %v", obj, err))
	}
	n.l2, n.l2Offset = obj, 0
	c.objectNodes[obj] = []*treeNode{n}
	op := &copyOp{seq: seq, obj: obj, node: n, devicePages: slices.Clone(n.devicePages), spans: spans}
	c.dev.pin(op.devicePages)
	c.writes.push(op)
	c.submit(op, true)
	c.counters.BackupReserved++
	c.counters.BytesD2H += int64(pages) * c.pageBytesPerRank()
	return op
}

// noteSplit keeps the controller's indexes right when the tree splits a node: the head inherits the tail's
// locks, so it is recorded among the step's locked nodes as often, and released with them; and a head that
// points into L2 is indexed under its object.
func (c *controller) noteSplit(head, tail *treeNode) {
	for i := 0; i < tail.lockRefs; i++ {
		c.work.locked = append(c.work.locked, head)
	}
	if head.l2 != 0 {
		c.objectNodes[head.l2] = append(c.objectNodes[head.l2], head)
	}
}

// dropEvicted forgets the L2 objects the allocator just evicted; nodes left with no KV anywhere are pruned.
func (c *controller) dropEvicted() {
	for _, obj := range c.alloc.Evicted() {
		c.counters.L2Evictions++
		for _, n := range c.objectNodes[obj] {
			n.l2, n.l2Offset = 0, 0
			c.pruneHollow(n)
		}
		delete(c.objectNodes, obj)
	}
}

// pruneHollow removes a node that holds no KV and has no children, then its parents while the same holds.
func (c *controller) pruneHollow(n *treeNode) {
	for n != c.tree.root && n.l2 == 0 && !n.inL1() && len(n.children) == 0 && n.lockRefs == 0 {
		parent := n.parent
		c.tree.remove(n)
		n = parent
	}
}

// takeDevicePages returns n device pages, evicting from L1 if needed, or nil when that is impossible.
func (c *controller) takeDevicePages(n int) []int32 {
	if n > c.dev.capacity() {
		return nil
	}
	for c.dev.available() < n {
		if !c.evictL1(n - c.dev.available()) {
			return nil
		}
	}
	return c.dev.take(n)
}

// evictL1 frees device pages from the least recently used evictable nodes (ties by node id). It reports false
// when no node could be evicted.
func (c *controller) evictL1(needPages int) bool {
	var candidates []*treeNode
	c.tree.forEach(func(n *treeNode) {
		if c.evictableFromL1(n) {
			candidates = append(candidates, n)
		}
	})
	slices.SortFunc(candidates, func(a, b *treeNode) int {
		if older(a, b) {
			return -1
		}
		return 1
	})
	progress := false
	freed := 0
	for _, n := range candidates {
		if freed >= needPages {
			break
		}
		pages := len(n.devicePages)
		if c.evictNode(n) {
			freed += pages
			progress = true
		}
	}
	return progress
}

// evictableFromL1: on the device, unused this step, no copy touching it, and no child on the device (a prefix
// leaves L1 after its extensions).
func (c *controller) evictableFromL1(n *treeNode) bool {
	if !n.inL1() || n.lockRefs > 0 || c.dev.anyPinned(n.devicePages) {
		return false
	}
	for _, child := range n.children {
		if child.inL1() {
			return false
		}
	}
	return true
}

// evictNode drops a node's device pages. A node backed up in L2 stays as an L2-only node; one that is not is
// deleted, except under write_back, where it is backed up first and leaves L1 when the backup commits.
func (c *controller) evictNode(n *treeNode) bool {
	if n.l2 == 0 && c.cfg.Policy == WriteBack {
		if op := c.backup(n); op != nil {
			op.evictAfterCommit = true
			return false
		}
	}
	c.dev.give(n.devicePages)
	n.devicePages = nil
	c.counters.L1Evictions++
	c.pruneHollow(n)
	return true
}

// writingCheck is the per-step commit: MIN of the write frontiers over the CP group; every backup with
// seq <= MIN is complete on every rank, so it is committed everywhere at this same step. It also reports whether
// every rank has committed everything it issued (the agreed end of a drain).
func (c *controller) writingCheck() (bool, error) {
	// The copy worker's goroutine can sit queued behind this one, which is locked to its OS thread for MPI and
	// may not block for a whole step; yielding once per step lets it run, as a GPU's copy engine would during
	// the forward pass.
	runtime.Gosched()
	frontier := c.writes.advance()
	committedUpTo, allIdle, err := c.cons.frontierCheck(WritingCheck, frontier, frontier >= c.writes.lastSeq)
	if err != nil {
		return false, err
	}
	for _, op := range c.writes.retire(committedUpTo) {
		if err := opErr(op); err != nil {
			return false, fmt.Errorf("%w: backup %d: %v", errCopy, op.seq, err)
		}
		if err := c.alloc.MarkObjectCommitted(op.obj); err != nil {
			return false, fmt.Errorf("commit of L2 object %d: %w", op.obj, err)
		}
		c.dev.unpin(op.devicePages)
		c.counters.BackupCommitted++
		if op.evictAfterCommit && c.evictableFromL1(op.node) {
			c.evictNode(op.node)
		}
	}
	return allIdle, nil
}

// loadingCheck waits until every rank of the CP group has finished every load-back issued so far, then
// verifies them. It runs every step, loads or not, and every rank leaves the loop at the same iteration because
// the exit is decided by the agreed flag, never by local state.
func (c *controller) loadingCheck() error {
	target := c.loads.lastSeq
	for {
		frontier := c.loads.advance()
		_, allDone, err := c.cons.frontierCheck(LoadingCheck, frontier, frontier >= target)
		if err != nil {
			return err
		}
		if allDone {
			break
		}
		time.Sleep(drainPollInterval)
	}
	for _, op := range c.loads.retire(target) {
		if err := opErr(op); err != nil {
			return fmt.Errorf("%w: load-back %d: %v", errCopy, op.seq, err)
		}
		if err := c.verifyLoad(op); err != nil {
			return err
		}
		c.dev.unpin(op.devicePages)
		if err := c.alloc.Unprotect(op.obj); err != nil {
			return fmt.Errorf("unprotect L2 object %d: %w", op.obj, err)
		}
	}
	return nil
}

// endStep releases the nodes the step's requests used.
func (c *controller) endStep() {
	work := &c.work
	for _, n := range work.locked {
		n.lockRefs--
	}
	work.locked = work.locked[:0]
}

// writeBacklogPages counts the device pages pinned by backups not yet committed. It is the same number on every
// rank of the group: pins are taken when a backup is issued and released when writing_check commits it.
func (c *controller) writeBacklogPages() int {
	n := 0
	for _, op := range c.writes.ops {
		n += len(op.devicePages)
	}
	return n
}

// throttleWrites drains the backups when they pin more than half of L1: without it a rank whose copies lag keeps
// L1 full of pinned pages and stops caching, as a serving engine would stall on a saturated copy stream. The
// decision rests on the backlog, which every rank agrees on, so every rank enters the drain's collectives.
func (c *controller) throttleWrites() error {
	if c.writeBacklogPages() <= c.dev.capacity()/2 {
		return nil
	}
	c.counters.WriteThrottles++
	return c.drainWrites()
}

// drainWrites polls writing_check until every backup issued on every rank of the group is committed.
func (c *controller) drainWrites() error {
	for {
		allIdle, err := c.writingCheck()
		if err != nil || allIdle {
			return err
		}
		time.Sleep(drainPollInterval)
	}
}

// flush drains every in-flight copy, meets the rest of the CP group at a barrier, and resets tree, queues and
// allocator to their fresh state. Afterwards the digest is the fresh digest on every rank.
func (c *controller) flush() error {
	if err := c.drainWrites(); err != nil {
		return err
	}
	if err := c.cons.barrier(); err != nil {
		return err
	}
	c.tree.reset()
	c.dev.reset()
	c.alloc.Reset()
	clear(c.objectNodes)
	c.writes.ops, c.loads.ops = c.writes.ops[:0], c.loads.ops[:0]
	c.counters.Flushes++
	if c.alloc.Digest() != c.alloc.FreshDigest() || c.alloc.FreeSlots() != c.geometry().Slots {
		c.counters.FlushWrong++
		return fmt.Errorf("flush left the allocator unlike a fresh one: digest %016x (fresh %016x), %d of %d slots free",
			c.alloc.Digest(), c.alloc.FreshDigest(), c.alloc.FreeSlots(), c.geometry().Slots)
	}
	return nil
}

// DivergenceError is a failed placement assert: the ranks of a CP group hold different allocator digests.
type DivergenceError struct {
	Step    int64
	Event   uint64 // requests replayed by the group when the assert ran: the event index of the design
	Group   int
	Digests []uint64 // by CP rank
}

func (e *DivergenceError) Error() string {
	byDigest := map[uint64][]int{}
	var order []uint64
	for r, d := range e.Digests {
		if _, seen := byDigest[d]; !seen {
			order = append(order, d)
		}
		byDigest[d] = append(byDigest[d], r)
	}
	var parts []string
	for _, d := range order {
		parts = append(parts, fmt.Sprintf("digest %016x on CP ranks %v", d, byDigest[d]))
	}
	return fmt.Sprintf("placement divergence in CP group %d at step %d (event %d): %s", e.Group, e.Step, e.Event, strings.Join(parts, "; "))
}

// placementAssert compares the allocator digest over the CP group and returns a *DivergenceError when ranks
// disagree.
func (c *controller) placementAssert(step int64) error {
	c.counters.PlacementChecks++
	digest := c.alloc.Digest()
	agree, err := c.cons.digestsAgree(digest)
	if err != nil || agree {
		return err
	}
	c.counters.Divergences++
	all, err := c.cons.gatherDigests(digest)
	if err != nil {
		return err
	}
	return &DivergenceError{Step: step, Event: c.clock, Group: c.cons.group, Digests: all}
}

// checkStepInvariants verifies, between steps, that no node is still locked, that exactly the pages of copies
// in flight are pinned, and that every device page is either free or owned by exactly one node.
func (c *controller) checkStepInvariants() error {
	owners := make([]int, c.dev.capacity())
	var err error
	c.tree.forEach(func(n *treeNode) {
		if n.lockRefs != 0 && err == nil {
			err = fmt.Errorf("node %d still has %d locks between steps", n.id, n.lockRefs)
		}
		for _, p := range n.devicePages {
			owners[p]++
		}
	})
	if err != nil {
		return err
	}
	pins := make([]int32, c.dev.capacity())
	for _, op := range c.writes.ops {
		for _, p := range op.devicePages {
			pins[p]++
		}
	}
	for _, p := range c.dev.free {
		owners[p]++
	}
	for p := range owners {
		if owners[p] != 1 {
			return fmt.Errorf("device page %d has %d owners (nodes and the free list)", p, owners[p])
		}
		if pins[p] != c.dev.pins[p] {
			return fmt.Errorf("device page %d has %d pins, but %d backups in flight use it", p, c.dev.pins[p], pins[p])
		}
	}
	return nil
}

// comparePlacements compares every live object's placement across the CP group, not only the digest: MIN and
// MAX of each object's placement hash, in object-id order. It counts the objects whose placement differs.
func (c *controller) comparePlacements() error {
	ids := make([]pool.ObjectID, 0, len(c.objectNodes))
	for id := range c.objectNodes {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the map only gathers the ids; their order comes from here
	// The vectors must have one length everywhere before they can be reduced element by element.
	agree, err := c.cons.digestsAgree(uint64(len(ids)))
	if err != nil {
		return err
	}
	c.counters.ObjectsCompared += int64(len(ids))
	if !agree {
		c.counters.ObjectsWrong += int64(len(ids))
		return nil
	}
	hashes := make([]uint64, 2*len(ids))
	for i, id := range ids {
		h := c.alloc.PlacementHash(id) ^ mix64(uint64(id))
		hashes[2*i], hashes[2*i+1] = h, ^h
	}
	if err := c.cons.minVector(PlacementAssert, hashes); err != nil {
		return err
	}
	for i := range ids {
		if hashes[2*i] != ^hashes[2*i+1] {
			c.counters.ObjectsWrong++
		}
	}
	return nil
}
