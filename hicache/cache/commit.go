package cache

import "fmt"

// fail records this rank's failure for its group's next consensus; the first one since the last
// consensus wins.
func (c *Core) fail(code FailureCode, err error) {
	if c.failure == nil {
		c.failure = &LocalFailure{Code: code, Err: err}
	}
}

// agree is the consensus of one step, or of a flush or the end of the run (drain true): it finishes
// this rank's load-backs (a local wait, then byte verification), with drain also its backups and L3
// I/O, and brings the frontiers, the digest and any failure to one all-reduce over the CP group.
// Then it commits every backup the group finished and releases the load-backs every rank finished,
// the same ones on every rank. checkDigest false (a recovery flush after a recorded divergence)
// lets differing digests pass.
//
// Every rank calls it at the same point of every step whatever its local state, and the number of
// calls never depends on local state: waiting for copies is local, so a drain costs this one call.
func (c *Core) agree(kind ConsensusKind, drain, checkDigest bool) (agreement, error) {
	c.env.Poll()
	if err := c.localWait(drain); err != nil {
		return agreement{}, err
	}
	v, err := c.localVote(kind)
	if err != nil {
		return agreement{}, err
	}
	a, err := c.consensus(kind, v)
	if err != nil {
		return a, err
	}
	if v.prefetchAhead != nil {
		c.agreeAhead(a.prefetchAhead)
	}
	if c.cfg.Geometry.CPSize > 1 {
		c.counters.PlacementChecks++
	}
	if checkDigest && !c.cfg.Testing.Bugs.has(BugAssertOff) && !a.digestsAgree() {
		return a, c.divergence(kind, v.digest)
	}
	if err := c.checkDrained(kind, a); err != nil {
		return a, err
	}
	committedUpTo := a.writeFrontier
	if c.cfg.Testing.Bugs.has(BugCommitOnLocalFrontier) {
		committedUpTo = v.writeFrontier
	}
	c.releaseAudited()
	if c.l3 != nil {
		c.retireWrites(a.storeFrontier)
		c.resolvePrefetches(a.prefetchFrontier, a.prefetchFailed)
	}
	c.commit(committedUpTo)
	c.releaseLoads(a.loadFrontier)
	if show := c.cfg.Testing.NearEviction; show != nil && c.l3 != nil {
		show(L2View{c})
	}
	c.l3WriteBackNearEviction()
	return a, nil
}

// localWait is this rank's wait before a consensus, which needs no other rank: its load-backs
// finished and verified (finishLoads), with drain its backups finished too, and its L3 I/O as
// waitL3 says.
func (c *Core) localWait(drain bool) error {
	if err := c.finishLoads(); err != nil {
		return err
	}
	if drain {
		backupsDone := func() bool { return c.writes.advance() >= c.writes.lastSeq }
		if err := c.env.Wait(waitWrites, backupsDone); err != nil {
			return err
		}
	}
	return c.waitL3(drain)
}

// localVote is this rank's vote in the consensus of kind: the L3 blocks found for the next step
// (aheadVote), the copy frontiers after the local wait, the allocator's digest, and the failure
// recorded since the last consensus (a copy failed by now among them), which the vote takes over
// so that the next consensus starts with none.
func (c *Core) localVote(kind ConsensusKind) (vote, error) {
	ahead, err := c.aheadVote(kind)
	if err != nil {
		return vote{}, err
	}
	writeFrontier, loadFrontier := c.writes.advance(), c.loads.advance()
	c.noteFailedCopies()
	v := vote{
		writeFrontier:  writeFrontier,
		writeIdle:      writeFrontier >= c.writes.lastSeq,
		loadFrontier:   loadFrontier,
		loadDone:       loadFrontier >= c.loads.lastSeq,
		digest:         c.alloc.Digest(),
		failure:        c.failure,
		prefetchAhead:  ahead,
		prefetchFailed: noFailure,
	}
	if c.l3 != nil {
		c.l3.vote(&v)
	}
	c.failure = nil
	return v, nil
}

// checkDrained refuses an agreement a of kind in which a rank still had copies in flight that its
// local wait should have finished: load-backs at any consensus, backups and L3 writes too at any
// but a step's (a flush, the final one). Flush and final always drain, on every rank; a step drains
// when its rank throttles, a decision that could differ between ranks if their states did, so only
// the kind, never the local drain flag, decides the check.
func (c *Core) checkDrained(kind ConsensusKind, a agreement) error {
	if !a.loadDone || (kind != StepConsensus && !a.writeIdle) {
		return fmt.Errorf(
			"%s consensus of CP group %d at step %d: a rank still had copies in flight after its local wait (load-backs done %v, backups idle %v)",
			kind,
			c.cfg.Group,
			c.step,
			a.loadDone,
			a.writeIdle,
		)
	}
	if c.l3 != nil && kind != StepConsensus && a.storeFrontier < c.l3.lastSeq.write {
		return fmt.Errorf(
			"%s consensus of CP group %d at step %d: a rank still had L3 writes in flight after its local wait",
			kind,
			c.cfg.Group,
			c.step,
		)
	}
	return nil
}

// waitL3 is the L3's local wait before a consensus: a drain (flush, final, or a backlog of writes
// holding too much L2) waits for all of this rank's L3 I/O; a step waits for its prefetch reads as
// the policy says (the Env ends a read that outlives its deadline as a failed one, so the timeout
// policy's wait ends by then).
func (c *Core) waitL3(drain bool) error {
	t := c.l3
	if t == nil {
		return nil
	}
	if drain || t.writeBacklog(c.geometry().Slots) {
		return c.env.Wait(waitL3, t.idle)
	}
	if t.cfg.PrefetchPolicy == PrefetchBestEffort {
		return nil
	}
	return c.env.Wait(waitPrefetch, t.readsDone)
}

// noteFailedCopies records the first finished copy that failed, of either direction, as this rank's
// failure.
func (c *Core) noteFailedCopies() {
	for _, q := range []*opQueue{&c.writes, &c.loads} {
		for _, op := range q.ops {
			if !op.done() || op.failCounted {
				continue
			}
			if err := op.err; err != nil {
				op.failCounted = true
				c.counters.CopyErrs++
				c.fail(
					FailureCopy,
					fmt.Errorf(
						"%w: %s %d (L2 object %d): %w",
						errCopy,
						q.name,
						op.seq,
						op.obj,
						err,
					),
				)
			}
		}
	}
}

// finishLoads waits, on this rank alone, until every load-back issued so far is done, and verifies
// each against the content function. The group's agreement that every rank finished follows in the
// consensus.
func (c *Core) finishLoads() error {
	if err := c.env.Wait(waitLoads, c.loadsDone); err != nil {
		return err
	}
	for _, op := range c.loads.ops {
		if op.verified || op.err != nil {
			continue
		}
		op.verified = true
		if c.cfg.Testing.Bugs.has(BugSkipLoadVerify) && op.seq%7 == 3 {
			// the bug: some load-backs are never checked (their bytes are right, so only a count
			// can tell)
			continue
		}
		if err := c.verifyLoad(op); err != nil {
			c.fail(FailureDevice, fmt.Errorf("verifying load-back %d: %w", op.seq, err))
		}
	}
	return nil
}

// loadsDone says whether every load-back this rank issued has finished its copy.
func (c *Core) loadsDone() bool { return c.loads.advance() >= c.loads.lastSeq }

// commit marks every backup with seq <= upTo committed, in sequence order: every rank of the group
// has finished them, so every rank commits them at this same step. The auditing rank then checks
// each whole object.
func (c *Core) commit(upTo uint64) {
	for _, op := range c.writes.retire(upTo) {
		if op.err != nil || op.node.l2 != op.obj {
			panic(
				c.broken(
					"commit of backup %d (L2 object %d, copy error %v) to %s: a failed copy never commits, and the node points into its object",
					op.seq,
					op.obj,
					op.err,
					op.node.describe(),
				),
			)
		}
		if err := c.alloc.MarkObjectCommitted(op.obj); err != nil {
			c.fail(FailureAllocator, fmt.Errorf("commit of L2 object %d: %w", op.obj, err))
			continue
		}
		c.dev.unpin(op.devicePages)
		c.evictq.push(op.node) // unpinned; see noteSplit for the nodes split off it
		c.counters.BackupCommitted++
		c.holdForAudit(op)
		c.audit(op)
		c.l3Committed(op.obj)
		if op.evictAfterCommit && c.evictableFromL1(op.node) {
			c.evictNode(op.node)
		}
	}
}

// releaseLoads retires the load-backs every rank has finished: their device pages and L2 objects
// are free again.
func (c *Core) releaseLoads(upTo uint64) {
	for _, op := range c.loads.retire(upTo) {
		if !op.verified || op.err != nil {
			panic(
				c.broken(
					"release of load-back %d (verified %v, copy error %v) into %s: only a verified load-back is released",
					op.seq,
					op.verified,
					op.err,
					op.node.describe(),
				),
			)
		}
		c.dev.unpin(op.devicePages)
		c.evictq.push(op.node) // unpinned; see noteSplit for the nodes split off it
		if c.cfg.Testing.Bugs.has(BugNoLoadProtect) {
			continue // the bug: its protection was never taken
		}
		if err := c.alloc.Unprotect(op.obj); err != nil {
			c.fail(FailureAllocator, fmt.Errorf("unprotect L2 object %d: %w", op.obj, err))
		}
	}
}

// endStep releases the nodes the step's requests used.
func (c *Core) endStep() {
	work := &c.work
	for _, n := range work.locked {
		if n.lockRefs <= 0 {
			panic(c.broken("the step's end unlocks %s, which holds no lock", n.describe()))
		}
		n.lockRefs--
		if n.lockRefs == 0 {
			c.evictq.push(n)
		}
	}
	work.locked = work.locked[:0]
}

// writeBacklogPages counts the device pages pinned by backups not yet committed. It is the same
// number on every rank of the group: pins are taken when a backup is issued and released when a
// consensus commits it.
func (c *Core) writeBacklogPages() int {
	n := 0
	for _, op := range c.writes.ops {
		n += len(op.devicePages)
	}
	return n
}

// throttleWrites says whether this step's consensus drains the backups: when they pin more than
// half of L1. A rank whose copies lag would otherwise keep L1 full of pinned pages and stop
// caching, as a serving engine stalls on a saturated copy stream. The backlog is replicated state;
// and even if it were not, the decision only changes how long a rank waits before the step's one
// consensus, never how many collectives it enters.
func (c *Core) throttleWrites() bool {
	if c.writeBacklogPages() <= c.dev.capacity()/2 {
		return false
	}
	c.counters.WriteThrottles++
	return true
}
