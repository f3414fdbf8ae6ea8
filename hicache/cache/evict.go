package cache

// Eviction from L1 (device pages) and what follows an eviction from L2. Every choice is a pure
// function of the replicated state (LRU by logical clock, ties by node id), so every rank of a
// group evicts the same nodes.

// dropEvicted forgets the L2 objects the allocator just evicted; nodes left with no KV anywhere are
// pruned.
func (c *Core) dropEvicted() {
	for _, obj := range c.alloc.Evicted() {
		c.counters.L2Evictions++
		if c.l3 != nil {
			delete(c.l3.backedUp, obj)
		}
		for _, n := range c.objectNodes[obj] {
			n.l2, n.l2Offset = 0, 0
			c.pruneHollow(n)
		}
		delete(c.objectNodes, obj)
	}
}

// pruneHollow removes a node that holds no KV and has no children, then its parents while the same
// holds.
func (c *Core) pruneHollow(n *treeNode) {
	for n != c.tree.root && n.l2 == 0 && !n.inL1() && len(n.children) == 0 && n.lockRefs == 0 {
		parent := n.parent
		c.tree.remove(n)
		n = parent
	}
}

// takeDevicePages returns n device pages, evicting from L1 if needed, or nil when that is
// impossible. Under write_back some evicted nodes leave L1 only when their backup commits: their
// pages count as on their way out, so that no more nodes are evicted than the request needs, but
// the request goes uncached this time.
func (c *Core) takeDevicePages(n int) []int32 {
	if n > c.dev.capacity() {
		return nil
	}
	leaving := 0
	for c.dev.available()+leaving < n {
		freed, backedUp := c.evictL1(n - c.dev.available() - leaving)
		if freed == 0 && backedUp == 0 {
			return nil
		}
		leaving += backedUp
	}
	pages := c.dev.take(n) // nil only when pages on their way out made up the count
	if (pages == nil && leaving == 0) || (pages != nil && len(pages) != n) {
		panic(
			c.broken(
				"%d device pages taken of %d asked, with %d free and %d leaving",
				len(pages),
				n,
				c.dev.available(),
				leaving,
			),
		)
	}
	return pages
}

// evictL1 frees device pages from the least recently used evictable nodes (ties by node id), popped
// from the eviction queue, until needPages are freed or on their way out (backedUp: write_back
// nodes that leave L1 when their backup commits). Only the nodes evictable when it begins are
// candidates (the queue holds back the parents it makes evictable), the order a walk and sort of
// the tree would give; the tests compare every eviction with that walk (Testing.CheckEvictions).
func (c *Core) evictL1(needPages int) (freed, backedUp int) {
	var check evictionCheck
	var chosen []*treeNode
	if c.evictionModel != nil {
		check = c.evictionModel(c)
	}
	c.evictq.beginEviction()
	for freed+backedUp < needPages {
		n := c.evictq.popOldest(c.evictableFromL1)
		if n == nil {
			break
		}
		if check != nil {
			chosen = append(chosen, n)
		}
		pages := len(n.devicePages)
		if c.evictNode(n) {
			freed += pages
		} else {
			backedUp += pages
		}
	}
	c.evictq.endEviction()
	if freed > c.dev.available() {
		panic(c.broken("an L1 eviction freed %d pages, but %d are free", freed, c.dev.available()))
	}
	if check != nil {
		if err := check(chosen, freed+backedUp, needPages); err != nil {
			c.fail(FailureInvariant, err)
		}
	}
	return freed, backedUp
}

// evictableFromL1: on the device, unused this step, no copy touching it, and no child on the device
// (a prefix leaves L1 after its extensions).
func (c *Core) evictableFromL1(n *treeNode) bool {
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

// evictNode drops a node's device pages. A node backed up in L2 stays as an L2-only node; one that
// is not is deleted, except under write_back, where it is backed up first and leaves L1 when the
// backup commits.
func (c *Core) evictNode(n *treeNode) bool {
	if !n.inL1() || n.lockRefs != 0 || n == c.tree.root {
		panic(
			c.broken(
				"L1 eviction of %s: only an unlocked node on the device leaves it",
				n.describe(),
			),
		)
	}
	if n.l2 == 0 && c.cfg.Policy == WriteBack {
		if op := c.backup(n); op != nil {
			op.evictAfterCommit = true
			return false
		}
	}
	parent := n.parent
	c.dev.give(n.devicePages)
	n.devicePages = nil
	c.counters.L1Evictions++
	c.pruneHollow(n)
	c.evictq.childLeftL1(parent)
	return true
}
