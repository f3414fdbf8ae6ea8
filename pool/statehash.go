package pool

import "sync/atomic"

// Tags open each part of StateHash, so that equal words in different tables never hash alike.
const (
	stateTagGeometry uint64 = iota + 0x5354 // "ST"
	stateTagBitmapLevel
	stateTagSlabs
	stateTagRecords
	stateTagBuckets
	stateTagLRU
	stateTagExtentSlots
	stateTagExtentNext
	stateTagEvicted
	stateTagCounters
	stateTagPolicy
)

// StateHash hashes the allocator's whole state, for checking that a flush really made it fresh:
// every word of every free-bitmap level and its lowest-free bound, the per-slab free and leaked
// counts, every object record (id, seq, clock, pages, extent chain head, extent count, LRU back
// link, refs, committed and live flags, SLRU segment, and the free-list links of free records),
// every bucket of the id table, the LRU heap in array order, the extent links, the last eviction
// list, the digest and every counter that a later call reads; and the policy's own state (SLRU's
// protected heap and its pages, admit_seen's table of keys), which LRU does not have and so does
// not hash: its state hashes are the ones the allocator had before it had policies.
//
// It walks the tables themselves rather than trusting the counters that Reset assigns (free slots,
// live objects, high water), so a Reset that forgets to refill the bitmap or to clear a table gives
// a hash unlike New's. The hash is a function of the calls since New or Reset, exactly like the
// state: two allocators with the same geometry and the same calls hash alike on every rank, and
// StateHash after Reset equals StateHash after New (FreshStateHash). It does not chain into the
// digest and changes nothing.
//
// Cost: one pass over the tables, O(Slots + MaxObjects) word reads with only non-zero words mixed
// (2^20 slots take a few milliseconds); meant for flush, not for every step.
func (a *Allocator) StateHash() uint64 {
	h := digestAdd(
		geometrySeed(a.geometry),
		stateTagGeometry,
		uint64(a.slotsPerSlab),
		a.freshDigest,
	)
	for k, level := range a.bitmap.levels {
		h = hashWords(h, stateTagBitmapLevel+uint64(k)<<32, level)
	}
	h = digestAdd(h, uint64(a.bitmap.slots), uint64(a.bitmap.lowFreeSlot))
	h = hashWords(h, stateTagSlabs, a.slabFreeSlots)
	h = hashWords(h, stateTagSlabs, a.slabLeakedSlots)
	h = a.hashRecords(h)
	h = hashWords(h, stateTagBuckets, a.table.buckets)
	h = hashWords(h, stateTagLRU, a.lru.items)
	h = hashWords(h, stateTagExtentSlots, a.extentSlots)
	h = hashWords(h, stateTagExtentNext, a.extentNext)
	h = hashWords(h, stateTagEvicted, a.evicted)
	if a.geometry.Policy != PolicyLRU {
		h = hashWords(h, stateTagPolicy, a.protected.items)
		h = hashWords(h, stateTagPolicy+1, a.seen)
		h = digestAdd(h, uint64(a.protectedPages), uint64(a.protectedPagesMax), uint64(a.seenKeys))
	}
	t := &a.table
	return digestAdd(
		h,
		stateTagCounters,
		uint64(t.shift),
		uint64(t.freeHead),
		uint64(t.highWater),
		uint64(t.liveObjects),
		uint64(a.freeSlots),
		uint64(a.lruPages),
		a.digest,
	)
}

// hashRecords mixes every non-zero record of the object table, at its index; all-zero records
// (never used, or cleared by Reset) mix nothing, so the pass costs little more than reading the
// table.
func (a *Allocator) hashRecords(h uint64) uint64 {
	h = digestAdd(h, stateTagRecords, uint64(len(a.table.records)))
	for index := range a.table.records {
		r := &a.table.records[index]
		if *r == (object{}) {
			continue
		}
		var flags uint64
		if r.committed {
			flags |= 1
		}
		if r.live {
			flags |= 2
		}
		flags |= uint64(r.segment) << 2 // 0 outside SLRU
		h = digestAdd(
			h,
			uint64(index),
			uint64(r.id),
			r.seq,
			r.clock,
			uint64(r.pages)<<32|uint64(r.firstSlot),
			uint64(r.extentCount)<<32|uint64(r.lruIndex),
			uint64(r.refs)<<32|flags,
		)
	}
	return h
}

// hashWords mixes the length of words and each non-zero word with its index: equal slices hash
// alike, and a slice that differs in any word (or in length) hashes differently. Zero words mix
// nothing, which keeps mostly empty tables cheap.
func hashWords[W uint32 | uint64 | ObjectID](h, tag uint64, words []W) uint64 {
	h = Mix64(Mix64(h^tag) ^ uint64(len(words)))
	for i, w := range words {
		if w != 0 {
			h = Mix64(Mix64(h^uint64(i)) ^ uint64(w))
		}
	}
	return h
}

// FreshStateHash is StateHash of a fresh allocator of geometry g: what a flush must leave behind.
// It builds one (New's tables are fresh zero memory, so this costs address space, not resident
// memory). A caller that already holds an allocator can equally take its StateHash right after New.
func FreshStateHash(g Geometry) (uint64, error) {
	a, err := New(g)
	if err != nil {
		return 0, err
	}
	return a.StateHash(), nil
}

// resetSkipsBitmapFill is the fault that BreakResetForTest installs.
var resetSkipsBitmapFill atomic.Bool

// BreakResetForTest is FOR TESTS ONLY: until the returned restore function is called, Reset in this
// process forgets to refill the free bitmap (the slots of the objects it drops stay used) while
// still resetting every counter and the digest, the bug that a flush check comparing only the
// digest and the free count cannot see. Tests of the flush check (here and in hicache) install it
// to show that StateHash catches it:
//
//	restore := pool.BreakResetForTest()
//	defer restore()
//
// It affects every allocator of the process, so a test using it must not run in parallel with
// others.
func BreakResetForTest() (restore func()) {
	resetSkipsBitmapFill.Store(true)
	return func() { resetSkipsBitmapFill.Store(false) }
}
