package pool

// What the allocator reports without changing anything: placements, lookups, digests, counts.

// Extents returns the object's extents in page order. The slice is an internal buffer, valid until
// the next call or mutation; it only grows (allocates) for an object with more extents than ever
// before.
func (a *Allocator) Extents(id ObjectID) ([]Extent, bool) {
	index, ok := a.table.find(id)
	if !ok {
		return nil, false
	}
	r := &a.table.records[index]
	a.extentBuf = a.extentBuf[:0]
	for pos, n := int(r.firstSlot), r.extentCount; n > 0; n-- {
		slab := pos / a.slotsPerSlab
		a.extentBuf = append(
			a.extentBuf,
			Extent{
				Slab:      uint32(slab),
				FirstSlot: uint32(pos - slab*a.slotsPerSlab),
				Slots:     a.extentSlots[pos],
			},
		)
		pos = int(a.extentNext[pos]) - 1
	}
	return a.extentBuf, true
}

// Lookup reports a live object.
func (a *Allocator) Lookup(id ObjectID) (ObjectInfo, bool) {
	index, ok := a.table.find(id)
	if !ok {
		return ObjectInfo{}, false
	}
	r := &a.table.records[index]
	return ObjectInfo{
		Pages:     int(r.pages),
		Seq:       r.seq,
		Clock:     r.clock,
		Committed: r.committed,
		Refs:      int(r.refs),
		Protected: r.segment == segProtected,
	}, true
}

// OldestEvictable lists committed, unreferenced objects in eviction order (the order Reserve would
// evict them: the policy's, LRU by (clock, id) ascending, see lruLess in lru.go, or under SLRU
// probation's objects in that order and then protected's) until their pages sum to at least
// maxPages or none are left: the shortest prefix of that order holding maxPages pages, or all of
// it. So a Reserve of p pages on a pool with f free slots that has to evict evicts exactly
// OldestEvictable(p-f) (or the first one, when only the full object table forced it), unless it
// misses. maxPages <= 0 lists nothing.
//
// The ids are appended to into[:0], whose contents are overwritten. It changes nothing (no table,
// no digest, no StateHash, no buffer of the allocator's), so it may run alongside other queries. It
// walks the heaps best first (lruWalk) and costs O(k log k) for the k objects listed, whatever the
// number of evictable objects; it allocates only when into is too short, or beyond 64 objects, for
// its scratch.
func (a *Allocator) OldestEvictable(maxPages int, into []ObjectID) []ObjectID {
	into = into[:0]
	if maxPages <= 0 {
		return into
	}
	var scratch [64]uint32
	pages := 0
	for _, h := range [2]*lruHeap{&a.lru, &a.protected} {
		walk := newLRUWalk(h, scratch[:])
		for pages < maxPages {
			var index uint32
			var ok bool
			if walk, index, ok = walk.next(h, a.table.records); !ok {
				break
			}
			r := &a.table.records[index]
			into = append(into, r.id)
			pages += int(r.pages)
		}
	}
	return into
}

// Digest is the order-sensitive chain over every mutation since New or Reset.
func (a *Allocator) Digest() uint64 { return a.digest }

// FreshDigest is the digest of New and of Reset: a function of the geometry only.
func (a *Allocator) FreshDigest() uint64 { return a.freshDigest }

// PlacementHash hashes the object's id and extents, for comparing one placement across ranks; 0 if
// the object is absent.
func (a *Allocator) PlacementHash(id ObjectID) uint64 {
	extents, ok := a.Extents(id)
	if !ok {
		return 0
	}
	h := digestAdd(a.freshDigest, uint64(id))
	for _, e := range extents {
		h = digestAdd(h, uint64(e.Slab), uint64(e.FirstSlot), uint64(e.Slots))
	}
	return h
}

// FreeSlots is the number of free slots in the whole pool.
func (a *Allocator) FreeSlots() int { return a.freeSlots }

// FreeSlotsInSlab is the number of free slots in slab `slab`.
func (a *Allocator) FreeSlotsInSlab(slab int) int { return int(a.slabFreeSlots[slab]) }

// Objects is the number of live objects.
func (a *Allocator) Objects() int { return a.table.liveObjects }

// Perturb is FOR FAULT INJECTION ONLY: it makes this allocator diverge as a broken rank would, so
// that tests and the `validate` command can show that the placement assert catches divergence. It
// leaks the lowest free slot (later placements shift, so the divergence shows in placements too)
// and chains a tag into the digest. CheckInvariants accounts for leaked slots; Reset forgets them.
func (a *Allocator) Perturb() {
	a.digest = digestAdd(a.digest, tagPerturb)
	a.leakLowestFree()
}

// PerturbStateForTest is FOR TESTS ONLY: Perturb's leak of the lowest free slot (one bit of the
// free bitmap, its counts kept consistent) with no record of its own in the digest, as a rank whose
// allocator lost a slot by mistake would diverge. Perturb's tag makes its divergence visible at the
// next consensus however little of a placement the digest covers; this one shows only through the
// placements that follow, so it tests that the digest covers them (digest_fields_test.go, and
// hicache/sim's recordless divergence jobs). It reports whether a slot was free to leak.
func (a *Allocator) PerturbStateForTest() bool { return a.leakLowestFree() }

// leakLowestFree takes the lowest free slot out of the free set without giving it to an object.
func (a *Allocator) leakLowestFree() bool {
	pos := a.bitmap.nextFree(0)
	if pos < 0 {
		return false
	}
	slab := pos / a.slotsPerSlab
	a.bitmap.take(pos, pos+1)
	a.slabFreeSlots[slab]--
	a.slabLeakedSlots[slab]++
	a.freeSlots--
	a.checkExpensive("perturb")
	return true
}

// TableBytes is what New(g) allocates for its tables (Allocator.TableBytes), computed without
// allocating, so that a caller can refuse a pool whose tables cannot fit in memory before trying. g
// must be valid.
func (g Geometry) TableBytes() int64 {
	maxObjects, slabs := int64(g.maxObjects()), int64(g.SlabCount())
	var bitmapWords int64
	for words := (int64(g.Slots) + wordBits - 1) / wordBits; ; words = (words + wordBits - 1) / wordBits {
		bitmapWords += words
		if words == 1 {
			break
		}
	}
	return 2*slabs*4 + bitmapWords*8 + (2*int64(g.Slots)+maxObjects)*4 + maxObjects*objectBytes +
		int64(
			bucketsFor(int(maxObjects)),
		)*8 + min(int64(g.Slots), 1024)*extentBytes + min(maxObjects, 1024)*8 + g.policyBytes()
}

// policyBytes is what the policy's own tables take (policy.go): SLRU's second heap, admit_seen's
// table of keys; LRU has none.
func (g Geometry) policyBytes() int64 {
	if g.Policy == PolicySLRU {
		return int64(g.maxObjects()) * 4
	}
	return int64(g.seenBuckets()) * 8
}

// TableBytes is the size of every table New allocated: address space, of which the OS backs only
// the pages the allocator has touched. It is about 8.1 bytes per slot plus 68 bytes per MaxObjects,
// and the policy's tables (SLRU 4 and admit_seen 8 to 16 bytes per MaxObjects).
func (a *Allocator) TableBytes() int64 {
	total := int64(len(a.slabFreeSlots)+len(a.slabLeakedSlots)) * 4
	for _, level := range a.bitmap.levels {
		total += int64(len(level)) * 8
	}
	total += int64(len(a.extentSlots)+len(a.extentNext)+cap(a.lru.items)+cap(a.protected.items)) * 4
	total += int64(len(a.seen)) * 8
	total += int64(len(a.table.records))*objectBytes + int64(len(a.table.buckets))*8
	return total + int64(cap(a.extentBuf))*extentBytes + int64(cap(a.evicted))*8
}
