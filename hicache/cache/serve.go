package cache

import (
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// stepWork is what the requests of one step leave for the end of the step: the nodes they locked.
type stepWork struct {
	locked []*treeNode
}

// serve runs one request through the cache: match its prefix, load L2 hits back, compute and insert
// the rest, and back up new KV by the write policy. Load-backs complete later in the step
// (loading_check).
func (c *Core) serve(req *workload.Request) error {
	before := c.counters
	defer func() {
		o := Outcome{
			L1Hit:    c.counters.L1HitTokens - before.L1HitTokens,
			L2Hit:    c.counters.L2HitTokens - before.L2HitTokens,
			L3Hit:    c.counters.L3HitTokens - before.L3HitTokens,
			Computed: c.counters.MissTokens - before.MissTokens,
		}
		if o.L1Hit+o.L2Hit+o.L3Hit+o.Computed != int64(len(req.InputIDs)) || o.L1Hit < 0 ||
			o.L2Hit < 0 ||
			o.L3Hit < 0 ||
			o.Computed < 0 {
			panic(
				c.broken(
					"a request of %d tokens served as %+v: every token is a hit of one tier or computed, once",
					len(req.InputIDs),
					o,
				),
			)
		}
		c.served = append(c.served, Served{Request: req, Outcome: o})
		if c.cfg.Testing.Served != nil {
			c.cfg.Testing.Served(o)
		}
	}()
	if show := c.cfg.Testing.Serving; show != nil {
		show(req)
	}
	work := &c.work
	c.clock++
	c.counters.Requests++
	p := c.geometry().PageTokens
	tokens := req.InputIDs[:len(req.InputIDs)/p*p] // only whole pages are cached
	c.oversize = len(tokens)/p > c.dev.capacity()
	c.counters.MissTokens += int64(len(req.InputIDs) - len(tokens))

	if c.cfg.Testing.Bugs.has(BugAdmitSeenOnRoot) && c.cfg.CPRank == 0 && len(tokens) > 0 {
		c.alloc.NoteSeenForTest(AdmissionKey(tokens[:p])) // the bug: a sighting only rank 0 counts
	}
	path := c.tree.walk(tokens, nil)
	for _, n := range path {
		n.lockRefs++
		work.locked = append(work.locked, n)
	}
	hitTokens, usable := 0, 0
	for _, n := range path {
		if !c.hitNode(n) {
			break
		}
		hitTokens += len(n.tokens)
		usable++
	}
	// The prefix is usable up to the first node without usable KV; the rest is recomputed.
	return c.computeRest(tokens, path, usable, hitTokens)
}

// hitNode serves one node of the matched path from L1 or, by a load-back, from L2. It reports false
// when the node holds no usable KV (hollow, or L1 could not take the load-back).
func (c *Core) hitNode(n *treeNode) bool {
	n.lastAccess = c.clock
	n.hits++
	if n.inL1() {
		c.counters.L1HitTokens += int64(len(n.tokens))
		c.touchL2(n)
		c.maybeSelectiveBackup(n)
		return true
	}
	if n.l2 == 0 || !c.committed(n.l2) {
		return false
	}
	// Protected before L1 makes room: under write_back, evicting from L1 backs nodes up, and their
	// reservations could otherwise evict this very object from L2.
	protect := !c.cfg.Testing.Bugs.has(
		BugNoLoadProtect,
	) // the bug: nothing keeps the slots while the load-back reads them
	if protect {
		if err := c.alloc.Protect(n.l2); err != nil {
			panic(c.broken("protect committed L2 object %d of node %d: %v", n.l2, n.id, err))
		}
	}
	pages := c.takeDevicePages(n.pages(c.geometry().PageTokens))
	if pages == nil {
		if protect {
			if err := c.alloc.Unprotect(n.l2); err != nil {
				panic(c.broken("unprotect L2 object %d of node %d: %v", n.l2, n.id, err))
			}
		}
		return false
	}
	if err := c.loadBack(n, pages); err != nil {
		// A committed object always has a placement and can be protected: this is a broken
		// invariant.
		panic(c.broken("load-back of node %d from L2 object %d: %v", n.id, n.l2, err))
	}
	n.devicePages = pages
	if n.fromL3 && c.cfg.Testing.Bugs.has(BugL3HitCountedAsL2) {
		// the bug: the first load-back of a prefetched node, the L3's bytes, counts as the L2's
		n.fromL3 = false
	}
	if n.fromL3 {
		c.counters.L3HitTokens += int64(len(n.tokens))
		n.fromL3 = c.cfg.Testing.Bugs.has(
			BugL3HitCountedTwice,
		) // the bug: its later load-backs, from the L2, count as the L3's too
	} else {
		c.counters.L2HitTokens += int64(len(n.tokens))
	}
	c.counters.LoadBacks++
	c.touchL2(n)
	return true
}

func (c *Core) committed(obj pool.ObjectID) bool {
	info, ok := c.alloc.Lookup(obj)
	return ok && info.Committed
}

func (c *Core) touchL2(n *treeNode) {
	if c.cfg.Testing.Bugs.has(BugL2TouchMissedOnRank) && c.cfg.CPRank == 1 {
		return // the bug: this rank's policy never hears of the hit
	}
	if n.l2 != 0 {
		if err := c.alloc.Touch(n.l2, c.clock); err != nil {
			panic(c.broken("touch of live L2 object %d: %v", n.l2, err))
		}
	}
}

// loadBack starts copying a node's pages from L2 into freshly taken device pages. The caller has
// protected the object from eviction; it stays protected until every rank of the group has finished
// the load.
func (c *Core) loadBack(n *treeNode, pages []int32) error {
	if n.inL1() || n.l2 == 0 || len(pages) != n.pages(c.geometry().PageTokens) {
		panic(
			c.broken(
				"load-back of %s into %d pages: only a node off the device, from its L2 object, whole",
				n.describe(),
				len(pages),
			),
		)
	}
	slots, err := c.slotsOf(n.l2, n.l2Offset, len(pages))
	if err != nil {
		return err
	}
	c.nextSeq++
	op := &copyOp{
		seq:         c.nextSeq,
		obj:         n.l2,
		node:        n,
		tokens:      n.tokens,
		startPos:    n.startPos,
		devicePages: pages,
		slots:       slots,
	}
	c.dev.pin(pages)
	c.loads.push(op)
	c.startCopy(op, false)
	c.counters.BytesH2D += int64(len(pages)) * c.pageBytesPerRank()
	c.counters.PagesLoadedBack += int64(len(pages))
	return nil
}

func (c *Core) pageBytesPerRank() int64 {
	g := c.geometry()
	return g.PartBytes() * int64(g.Layers) * int64(g.PayloadsPerLayer)
}

// computeRest "runs the model" over the tokens after the usable prefix: it writes their KV into
// device pages and records them in the tree, filling the hollow nodes of the rest of the path and
// adding one leaf for the tokens past the path.
func (c *Core) computeRest(tokens []int32, path []*treeNode, usable, hitTokens int) error {
	c.counters.MissTokens += int64(len(tokens) - hitTokens)
	parent, pos := c.tree.root, 0
	for i, n := range path {
		if i >= usable && !n.inL1() && !c.fill(n) {
			c.uncached(n.pages(c.geometry().PageTokens))
		}
		parent, pos = n, pos+len(n.tokens)
	}
	if pos == len(tokens) {
		return nil
	}
	leafPages := (len(tokens) - pos) / c.geometry().PageTokens
	pages := c.takeDevicePages(leafPages)
	if pages == nil {
		c.uncached(leafPages)
		return nil
	}
	leaf := c.tree.newNode(parent, tokens[pos:len(tokens):len(tokens)], pos)
	leaf.lastAccess = c.clock
	leaf.hits = 1
	leaf.devicePages = pages
	c.evictq.push(leaf) // unlocked: a candidate at once, unless its backup pins it
	if err := c.writeContent(leaf); err != nil {
		return err
	}
	if c.cfg.Policy == WriteThrough {
		c.backup(leaf)
	}
	return nil
}

// uncached counts pages computed but not cached, and whether their request could never have fit L1.
func (c *Core) uncached(pages int) {
	c.counters.Uncached += int64(pages)
	if c.oversize {
		c.counters.UncachedOversize += int64(pages)
	}
}

// fill gives a hollow node recomputed KV. It reports false when L1 has no room.
func (c *Core) fill(n *treeNode) bool {
	pages := c.takeDevicePages(n.pages(c.geometry().PageTokens))
	if pages == nil {
		return false
	}
	n.devicePages = pages
	n.fromL3 = false
	if err := c.writeContent(n); err != nil {
		c.fail(FailureDevice, err)
	}
	if c.cfg.Policy == WriteThrough && n.l2 == 0 {
		c.backup(n)
	}
	return true
}

func (c *Core) maybeSelectiveBackup(n *treeNode) {
	if c.cfg.Policy == WriteThroughSelective && n.hits >= 2 && n.l2 == 0 &&
		!c.dev.anyPinned(n.devicePages) {
		c.backup(n)
	}
}

// writeContent writes the node's KV, as the model would have computed it, into its device pages.
func (c *Core) writeContent(n *treeNode) error {
	f := &Fill{DevicePages: n.devicePages, Tokens: n.tokens, StartPos: n.startPos}
	if n.l2 != 0 {
		slots, err := c.slotsOf(n.l2, n.l2Offset, len(n.devicePages))
		if err != nil {
			panic(
				c.broken(
					"the L2 slots of %s, which points into object %d: %v",
					n.describe(),
					n.l2,
					err,
				),
			)
		}
		f.Slots = slots
	}
	return c.env.Fill(f)
}

// verifyLoad checks every part of a finished load-back against the content function and counts
// mismatches.
func (c *Core) verifyLoad(op *copyOp) error {
	checked, mismatches, err := c.env.VerifyLoad(
		&Verify{Seq: op.seq, DevicePages: op.devicePages, Tokens: op.tokens, StartPos: op.startPos},
	)
	c.counters.PagesChecked += checked
	c.counters.Mismatches += mismatches
	return err
}
