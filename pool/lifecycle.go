package pool

import "fmt"

// An object's life after Reserve: abort, commit, release, evict, touch, protect. Each is all or
// nothing on a valid id, chains into the digest, and changes nothing on misuse (an error naming the
// object).

// Abort rolls back an uncommitted reservation. Aborting an absent id is a no-op, so a rollback can
// be repeated; aborting a committed or protected object is misuse.
func (a *Allocator) Abort(id ObjectID) error {
	index, ok := a.table.find(id)
	if !ok {
		return nil
	}
	r := &a.table.records[index]
	if r.committed {
		return fmt.Errorf("%w: cannot abort object %d, release it", ErrCommitted, id)
	}
	if r.refs != 0 {
		return fmt.Errorf("%w: cannot abort object %d with %d references", ErrProtected, id, r.refs)
	}
	a.digest = digestAdd(a.digest, tagAbort, uint64(id))
	a.drop(index)
	return nil
}

// MarkObjectCommitted marks the object's backup complete on every rank; it becomes evictable once
// unreferenced. Committing a committed object is a no-op: writing_check may report an old seq
// again.
func (a *Allocator) MarkObjectCommitted(id ObjectID) error {
	index, err := a.lookup(id)
	if err != nil {
		return err
	}
	r := &a.table.records[index]
	if r.committed {
		return nil
	}
	r.committed = true
	a.digest = digestAdd(a.digest, tagCommit, uint64(id))
	a.updateEvictable(index)
	return nil
}

// updateEvictable puts record `index` into the LRU or takes it out, to match committed && refs ==
// 0.
func (a *Allocator) updateEvictable(index uint32) {
	r := &a.table.records[index]
	want := r.committed && r.refs == 0
	switch {
	case want && r.lruIndex == 0:
		a.pushEvictable(index)
	case !want && r.lruIndex != 0:
		a.removeEvictable(index)
	}
	a.checkExpensive("commit, protect or unprotect")
}

// Release drops an object, committed or not, and frees its slots. A protected object is being
// loaded from its slots, so releasing it is misuse.
func (a *Allocator) Release(id ObjectID) error {
	index, err := a.lookup(id)
	if err != nil {
		return err
	}
	if refs := a.table.records[index].refs; refs != 0 {
		return fmt.Errorf("%w: cannot release object %d with %d references", ErrProtected, id, refs)
	}
	a.digest = digestAdd(a.digest, tagRelease, uint64(id))
	a.drop(index)
	return nil
}

// Evict explicitly evicts a committed, unreferenced object.
func (a *Allocator) Evict(id ObjectID) error {
	index, err := a.lookup(id)
	if err != nil {
		return err
	}
	r := &a.table.records[index]
	if !r.committed {
		return fmt.Errorf("%w: cannot evict object %d", ErrNotCommitted, id)
	}
	if r.refs != 0 {
		return fmt.Errorf("%w: cannot evict object %d with %d references", ErrProtected, id, r.refs)
	}
	a.evictRecord(index)
	return nil
}

// Touch sets the object's LRU clock to the logical clock of an access. Under SLRU it also promotes
// an object in probation to the protected segment (policy.go).
func (a *Allocator) Touch(id ObjectID, clock uint64) error {
	index, err := a.lookup(id)
	if err != nil {
		return err
	}
	r := &a.table.records[index]
	r.clock = clock
	a.digest = digestAdd(a.digest, tagTouch, uint64(id), clock)
	switch {
	case a.geometry.Policy == PolicySLRU && r.segment == segProbation &&
		!a.hasPolicyBug(PolicyBugPromotionMissed): // simbugs only: the promotion forgotten
		a.promote(index)
	case r.lruIndex != 0:
		a.heapOf(r).fix(a.table.records, index)
	}
	a.checkExpensive("touch")
	return nil
}

// Protect adds a reference: the object is being loaded and must not be evicted or released.
func (a *Allocator) Protect(id ObjectID) error {
	index, err := a.lookup(id)
	if err != nil {
		return err
	}
	r := &a.table.records[index]
	if r.refs == ^uint32(0) {
		return fmt.Errorf("%w: object %d reference count would overflow", ErrProtected, id)
	}
	r.refs++
	a.digest = digestAdd(a.digest, tagProtect, uint64(id))
	a.updateEvictable(index)
	return nil
}

// Unprotect drops a reference added by Protect.
func (a *Allocator) Unprotect(id ObjectID) error {
	index, err := a.lookup(id)
	if err != nil {
		return err
	}
	r := &a.table.records[index]
	if r.refs == 0 {
		return fmt.Errorf("%w: object %d", ErrNotProtected, id)
	}
	r.refs--
	a.digest = digestAdd(a.digest, tagUnprotect, uint64(id))
	a.updateEvictable(index)
	return nil
}
