package cache

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// The placement assert (DESIGN.md, "Invariants" 6) and the commit audit ("Verification"). The
// digest rides in every consensus; what is here is what happens when it differs, the slower
// object-by-object comparison, and the audit of each committed object's bytes.

// DivergenceError is a failed placement assert: the ranks of a CP group hold different allocator
// digests, or place some objects differently.
type DivergenceError struct {
	Step int64
	// requests replayed by the group when the assert ran: the event index of the design
	Event        uint64
	Group        int
	Where        string   // the consensus that caught it
	Digests      []uint64 // by CP rank; nil when the digests agreed and objects differed
	ObjectsWrong int64    // objects placed differently (object comparison only)
	// OutOfStep is set when the diverged ranks had already entered different calls (which the
	// consensus paired): the group cannot recover from that in place, so validate does not record
	// it but fails.
	OutOfStep *OutOfStepError
}

// Scope: every rank of the group sees the same agreed digests and hashes.
func (e *DivergenceError) Scope() errscope.Scope { return errscope.GroupScope }

func (e *DivergenceError) Error() string {
	head := fmt.Sprintf(
		"placement divergence in CP group %d at step %d (event %d), caught by the %s",
		e.Group,
		e.Step,
		e.Event,
		e.Where,
	)
	if e.Digests == nil {
		return fmt.Sprintf(
			"%s: %d objects placed differently across the group",
			head,
			e.ObjectsWrong,
		)
	}
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
	return fmt.Sprintf("%s: %s", head, strings.Join(parts, "; "))
}

// divergence builds the error of a consensus whose digests differed, with every rank's digest.
// Every rank of the group calls it after the same agreement, so the gather matches.
func (c *Core) divergence(kind ConsensusKind, digest uint64) error {
	c.counters.Divergences++
	all, err := c.gatherDigests(digest)
	if err != nil {
		return err
	}
	where := kind.String() + " consensus"
	if kind == FlushConsensus {
		where += " (before the flush's reset)"
	}
	return &DivergenceError{
		Step:    c.step,
		Event:   c.clock,
		Group:   c.cfg.Group,
		Where:   where,
		Digests: all,
	}
}

// divergenceOutOfStep builds the error of a consensus call that paired different calls of the ranks
// (their tags differ) whose digests differ too: the divergence made them decide differently which
// call to enter. Every rank names the calls from the agreed tags, so the message is the same on
// each whichever call it entered.
func (c *Core) divergenceOutOfStep(outOfStep *OutOfStepError, digest uint64) error {
	c.counters.Divergences++
	all, err := c.gatherDigests(digest)
	if err != nil {
		return err
	}
	where := fmt.Sprintf(
		"consensus that paired the %s with the %s (the diverged ranks entered different calls)",
		describeTag(outOfStep.MinTag),
		describeTag(outOfStep.MaxTag),
	)
	return &DivergenceError{
		Step:      outOfStep.Step,
		Event:     c.clock,
		Group:     c.cfg.Group,
		Where:     where,
		Digests:   all,
		OutOfStep: outOfStep,
	}
}

// comparePlacements compares every live object's placement across the CP group, not only the
// digest: MIN and MAX of each object's placement hash, in object-id order. Objects placed
// differently are a divergence, or in validate (record) only counted.
func (c *Core) comparePlacements(record bool) error {
	if c.cfg.Testing.Bugs.has(BugAssertOff) {
		return nil
	}
	ids := make([]pool.ObjectID, 0, len(c.objectNodes))
	for id := range c.objectNodes {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the map only gathers the ids; their order comes from here
	hashes := make([]uint64, 2*len(ids))
	for i, id := range ids {
		h := c.alloc.PlacementHash(id) ^ pool.Mix64(uint64(id))
		hashes[2*i], hashes[2*i+1] = h, ^h
	}
	sameCount, err := c.compareObjects(hashes)
	if err != nil {
		return err
	}
	c.counters.ObjectsCompared += int64(len(ids))
	wrong := int64(0)
	if !sameCount {
		wrong = int64(len(ids))
	} else {
		for i := range ids {
			if hashes[2*i] != ^hashes[2*i+1] {
				wrong++
			}
		}
	}
	c.counters.ObjectsWrong += wrong
	if wrong == 0 || record {
		return nil
	}
	c.counters.Divergences++
	return &DivergenceError{
		Step:         c.step,
		Event:        c.clock,
		Group:        c.cfg.Group,
		Where:        "object-by-object comparison",
		ObjectsWrong: wrong,
	}
}

// audit checks a freshly committed object's bytes in the shared slab against the content function:
// on each node of the group, the one rank whose node-local part its sequence number names checks
// every part of that node's slab (on a group of one node, every CP rank's parts, by the rank seq
// mod cp). A rank's load-back verification sees only its own parts; the audit is what catches a
// commit that came before another rank's copy finished. Its verdict is counted on the auditing
// rank, and the group's report sums it.
func (c *Core) audit(op *copyOp) {
	g := c.geometry()
	parts := g.NodeParts()
	if int(op.seq%uint64(parts)) != c.nodePart() {
		return
	}
	if c.cfg.Testing.Bugs.has(BugAuditOneNode) && c.cfg.GroupNode != 0 {
		// the bug: only the group's first node audits, so a late copy on another node goes unseen
		return
	}
	slots, err := c.slotsOf(op.obj, 0, len(op.devicePages))
	if err != nil {
		c.fail(FailureAllocator, fmt.Errorf("audit: committed L2 object %d: %w", op.obj, err))
		return
	}
	if c.cfg.Testing.Bugs.has(BugAuditSkipsRank) {
		parts--
	}
	ok := c.env.Audit(
		&Audit{
			Seq:      op.seq,
			Object:   uint64(op.obj),
			Slots:    slots,
			Tokens:   op.tokens,
			StartPos: op.startPos,
			Parts:    parts,
		},
	)
	c.counters.AuditObjects++
	if !ok {
		c.counters.AuditMismatches++
	}
}

// holdForAudit protects a freshly committed object until the group's next consensus, on every rank
// alike. The auditing ranks read every rank's parts; without the hold a faster rank could evict the
// object in its next step and start writing a new backup into the same slots while the auditor
// still reads them.
func (c *Core) holdForAudit(op *copyOp) {
	if c.cfg.Testing.Bugs.has(BugNoAuditHold) {
		return
	}
	if err := c.alloc.Protect(op.obj); err != nil {
		c.fail(FailureAllocator, fmt.Errorf("audit hold of L2 object %d: %w", op.obj, err))
		return
	}
	c.auditHeld = append(c.auditHeld, op.obj)
}

// releaseAudited drops the holds of the last consensus's commits: by this consensus the auditor has
// finished.
func (c *Core) releaseAudited() {
	for _, obj := range c.auditHeld {
		if err := c.alloc.Unprotect(obj); err != nil {
			c.fail(FailureAllocator, fmt.Errorf("audit release of L2 object %d: %w", obj, err))
		}
	}
	c.auditHeld = c.auditHeld[:0]
}

// checkStepInvariants verifies, between steps, that no node is still locked, that exactly the pages
// of copies in flight are pinned, and that every device page is either free or owned by exactly one
// node.
func (c *Core) checkStepInvariants() error {
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
	if err := c.checkEvictQueue(); err != nil {
		return err
	}
	pins := make([]int32, c.dev.capacity())
	for _, q := range []*opQueue{&c.writes, &c.loads} {
		for _, op := range q.ops {
			for _, p := range op.devicePages {
				pins[p]++
			}
		}
	}
	for _, p := range c.dev.free {
		owners[p]++
	}
	for p := range owners {
		if owners[p] != 1 {
			return fmt.Errorf(
				"device page %d has %d owners (nodes and the free list)",
				p,
				owners[p],
			)
		}
		if pins[p] != c.dev.pins[p] {
			return fmt.Errorf(
				"device page %d has %d pins, but %d copies in flight use it",
				p,
				c.dev.pins[p],
				pins[p],
			)
		}
	}
	return nil
}

// broken is what the core panics with on a broken invariant of this rank's own state (DESIGN.md,
// "Asserts"): the invariant, named by the message, and a dump of the state it checked, as pool's
// brokenInvariant: a rank whose tree, device pages or copy queues are wrong must stop, never place,
// copy or serve on. Each check panics itself, panic(c.broken(...)), so that the hot path keeps no
// value alive for it.
func (c *Core) broken(format string, args ...any) string {
	return "cache: broken invariant: " + fmt.Sprintf(format, args...) + "\n" + c.dump()
}

// dump describes what the core's invariants are about, bounded so that a panic stays readable.
func (c *Core) dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "CP group %d rank %d: step %d, clock %d, consensus calls %d, next seq %d\n",
		c.cfg.Group, c.cfg.CPRank, c.step, c.clock, c.calls, c.nextSeq)
	fmt.Fprintf(
		&b,
		"tree: %d nodes, %d locked this step; device: %d of %d pages free; copies in flight: %d\n",
		c.tree.nodes,
		len(c.work.locked),
		c.dev.available(),
		c.dev.capacity(),
		len(c.inFlight),
	)
	for _, q := range []*opQueue{&c.writes, &c.loads} {
		b.WriteString(q.dump())
	}
	fmt.Fprintf(
		&b,
		"L2: %d of %d slots free, %d objects, %d in the tree, %d held for audit, digest %#016x\n",
		c.alloc.FreeSlots(),
		c.geometry().Slots,
		c.alloc.Objects(),
		len(c.objectNodes),
		len(c.auditHeld),
		c.alloc.Digest(),
	)
	if c.l3 != nil {
		fmt.Fprintf(
			&b,
			"L3: last write %d, last read %d, %d reads in flight, %d writes scheduled\n",
			c.l3.lastSeq.write,
			c.l3.lastSeq.read,
			len(c.l3.reads),
			len(c.l3.writes),
		)
	}
	return b.String()
}

// describe names a node and what it holds, for a dump.
func (n *treeNode) describe() string {
	return fmt.Sprintf(
		"node %d (tokens [%d, %d), %d device pages, L2 object %d+%d, %d locks, last access %d)",
		n.id,
		n.startPos,
		n.startPos+len(n.tokens),
		len(n.devicePages),
		n.l2,
		n.l2Offset,
		n.lockRefs,
		n.lastAccess,
	)
}
