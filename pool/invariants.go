package pool

import (
	"fmt"
	"strings"
)

// brokenInvariant is what pool panics with on a broken internal invariant: the invariant, named by
// the message, and a dump of the state it checked, as the Go runtime's page allocator throws: a
// divergent allocator must stop loudly, never carry on placing. The parts (free bitmap, object
// table, LRU heap) assert on their own and dump what they hold; the allocator dumps its counters.
//
// Each check panics itself, panic(x.broken(...)), rather than calling a function that panics: a
// branch that ends in panic keeps no value alive, so the compiler spills nothing on the hot path
// for it.
func brokenInvariant(dump string, format string, args ...any) string {
	return "pool: broken invariant: " + fmt.Sprintf(format, args...) + "\n" + dump
}

// broken is brokenInvariant with the allocator's counters and first bitmap words.
func (a *Allocator) broken(format string, args ...any) string {
	return brokenInvariant(a.dump(), format, args...)
}

// broken is brokenInvariant with the bitmap words around word w of level 0 and the summary words
// above it.
func (b *freeBitmap) broken(w int, format string, args ...any) string {
	return brokenInvariant(b.dump(w), format, args...)
}

// dump describes the bitmap around word w of level 0: its neighbours and, per summary level, the
// word that holds its summary bit.
func (b *freeBitmap) dump(w int) string {
	var out strings.Builder
	fmt.Fprintf(
		&out,
		"free bitmap: slots=%d levels=%d low_free=%d\n",
		b.slots,
		len(b.levels),
		b.lowFreeSlot,
	)
	for v := max(w-1, 0); v < min(w+2, len(b.levels[0])); v++ {
		fmt.Fprintf(&out, "free bitmap word %d: %064b\n", v, b.levels[0][v])
	}
	for k, bit := 1, w; k < len(b.levels); k++ {
		fmt.Fprintf(
			&out,
			"free bitmap level %d word %d: %064b\n",
			k,
			bit/wordBits,
			b.levels[k][bit/wordBits],
		)
		bit /= wordBits
	}
	return out.String()
}

// dump describes the counters and the first words of the bitmap, bounded so a panic stays readable.
func (a *Allocator) dump() string {
	var b strings.Builder
	g := a.geometry
	fmt.Fprintf(&b, "geometry: slots=%d slots_per_slab=%d slabs=%d max_objects=%d layout=%s\n",
		g.Slots, a.slotsPerSlab, g.SlabCount(), g.maxObjects(), g.Layout)
	fmt.Fprintf(&b, "free_slots=%d objects=%d lru=%d lru_pages=%d digest=%#016x\n",
		a.freeSlots, a.table.liveObjects, len(a.lru.items), a.lruPages, a.digest)
	for slab := range min(len(a.slabFreeSlots), 16) {
		fmt.Fprintf(
			&b,
			"slab %d: slots=%d free_slots=%d leaked_slots=%d\n",
			slab,
			g.SlabSlots(slab),
			a.slabFreeSlots[slab],
			a.slabLeakedSlots[slab],
		)
	}
	for w, word := range a.bitmap.levels[0][:min(len(a.bitmap.levels[0]), 8)] {
		fmt.Fprintf(&b, "free bitmap word %d: %064b\n", w, word)
	}
	return b.String()
}

// expensiveChecks makes every mutation end with CheckInvariants, O(slots + objects) each. Only
// tests set it (withExpensiveChecks), and not in parallel with other tests; the mutations assert
// only their cheap pre- and post-conditions otherwise.
var expensiveChecks = false

// checkExpensive checks the whole state after mutation op when expensiveChecks is set; it inlines
// to one test of the flag on the hot path.
func (a *Allocator) checkExpensive(op string) {
	if expensiveChecks {
		a.checkAll(op)
	}
}

// checkAll throws if CheckInvariants finds a violation after mutation op.
func (a *Allocator) checkAll(op string) {
	if err := a.CheckInvariants(); err != nil {
		panic(a.broken("after %s: %v", op, err))
	}
}

// CheckInvariants checks the whole state, in O(slots + objects), and returns the first violation:
//   - the summary levels of the free bitmap agree with level 0 and no bit lies at or beyond Slots;
//   - per slab, free (counter) == free (bitmap) and free + reserved + leaked == SlabSlots;
//   - every live object is found by its id, its extents lie inside one slab each, hold exactly its
//     pages, are used in the bitmap and overlap no other object's extents;
//   - the LRU (under SLRU, its two heaps) holds exactly the committed, unreferenced objects, in
//     heap order, with their pages summed; the policy's own marks agree (checkLRU).
func (a *Allocator) CheckInvariants() error {
	if level, word := a.bitmap.checkSummaries(); level >= 0 {
		return fmt.Errorf(
			"free bitmap level %d word %d disagrees with the level below (or has bits beyond Slots)",
			level,
			word,
		)
	}
	reservedSlots := make([]int, len(a.slabFreeSlots))
	owned := newFreeBitmap(a.geometry.Slots) // set = not yet claimed by an object
	liveObjects, evictableObjects, evictablePages := 0, 0, 0
	for index := range a.table.highWater {
		r := &a.table.records[index]
		if !r.live {
			continue
		}
		liveObjects++
		if err := a.checkObject(index, reservedSlots, &owned); err != nil {
			return err
		}
		if r.committed && r.refs == 0 {
			evictableObjects++
			evictablePages += int(r.pages)
		}
	}
	if liveObjects != a.table.liveObjects {
		return fmt.Errorf(
			"object table counts %d live objects, records hold %d",
			a.table.liveObjects,
			liveObjects,
		)
	}
	freeSlots := 0
	for slab := range a.slabFreeSlots {
		base := slab * a.slotsPerSlab
		limit := base + a.geometry.SlabSlots(slab)
		bitmapFreeSlots := a.bitmap.freeSlotsIn(base, limit)
		if int(a.slabFreeSlots[slab]) != bitmapFreeSlots {
			return fmt.Errorf(
				"slab %d: free counter %d, bitmap %d",
				slab,
				a.slabFreeSlots[slab],
				bitmapFreeSlots,
			)
		}
		if sum := bitmapFreeSlots + reservedSlots[slab] + int(a.slabLeakedSlots[slab]); sum != limit-base {
			return fmt.Errorf(
				"slab %d: free %d + reserved %d + leaked %d != capacity %d slots",
				slab,
				bitmapFreeSlots,
				reservedSlots[slab],
				a.slabLeakedSlots[slab],
				limit-base,
			)
		}
		freeSlots += bitmapFreeSlots
	}
	if freeSlots != a.freeSlots {
		return fmt.Errorf("free counter %d, slabs hold %d free slots", a.freeSlots, freeSlots)
	}
	return a.checkLRU(evictableObjects, evictablePages)
}

// checkObject checks one live record's lookup and extents, and claims its slots in owned.
func (a *Allocator) checkObject(index uint32, reservedSlots []int, owned *freeBitmap) error {
	r := &a.table.records[index]
	if found, ok := a.table.find(r.id); !ok || found != index {
		return fmt.Errorf("object %d (record %d) not found by id", r.id, index)
	}
	pages, pos := 0, int(r.firstSlot)
	for n := range r.extentCount {
		if pos < 0 || pos >= a.geometry.Slots {
			return fmt.Errorf(
				"object %d extent %d starts at slot %d, outside the pool",
				r.id,
				n,
				pos,
			)
		}
		run, slab := int(a.extentSlots[pos]), pos/a.slotsPerSlab
		if run == 0 || pos+run > slab*a.slotsPerSlab+a.geometry.SlabSlots(slab) {
			return fmt.Errorf(
				"object %d extent %d [%d, %d) is empty or crosses the end of slab %d",
				r.id,
				n,
				pos,
				pos+run,
				slab,
			)
		}
		if a.bitmap.freeSlotsIn(pos, pos+run) != 0 {
			return fmt.Errorf("object %d extent [%d, %d) has free slots", r.id, pos, pos+run)
		}
		if owned.freeSlotsIn(pos, pos+run) != run {
			return fmt.Errorf(
				"object %d extent [%d, %d) overlaps another object",
				r.id,
				pos,
				pos+run,
			)
		}
		owned.take(pos, pos+run)
		reservedSlots[slab] += run
		pages += run
		pos = int(a.extentNext[pos]) - 1
	}
	if pages != int(r.pages) || pos != -1 {
		return fmt.Errorf(
			"object %d has %d pages, extents hold %d (chain end %d)",
			r.id,
			r.pages,
			pages,
			pos,
		)
	}
	if (r.lruIndex != 0) != (r.committed && r.refs == 0) {
		return fmt.Errorf(
			"object %d: in LRU %v, committed %v, refs %d",
			r.id,
			r.lruIndex != 0,
			r.committed,
			r.refs,
		)
	}
	return nil
}

// checkLRU checks both heaps' order and back links, the evictable totals, and the policy's own
// state: every record in the heap of its segment, the protected segment's pages (none outside
// SLRU), and admit_seen's count of used buckets.
func (a *Allocator) checkLRU(evictableObjects, evictablePages int) error {
	if a.evictableObjects() != evictableObjects || a.lruPages != evictablePages {
		return fmt.Errorf("LRU holds %d objects, %d pages; evictable are %d objects, %d pages",
			a.evictableObjects(), a.lruPages, evictableObjects, evictablePages)
	}
	for segment, h := range [2]*lruHeap{&a.lru, &a.protected} {
		for i, index := range h.items {
			r := &a.table.records[index]
			if int(r.lruIndex) != i+1 || int(r.segment) != segment {
				return fmt.Errorf(
					"heap of segment %d position %d holds record %d whose back link is %d, segment %d",
					segment, i, index, r.lruIndex, r.segment)
			}
			if i > 0 && lruLess(a.table.records, index, h.items[(i-1)/2]) {
				return fmt.Errorf("heap of segment %d: position %d orders before its parent",
					segment, i)
			}
		}
	}
	return a.checkPolicyMarks()
}

// checkPolicyMarks checks the marks a policy keeps outside the heaps: SLRU's protected pages (no
// record in the protected segment outside SLRU), and admit_seen's count of used buckets.
func (a *Allocator) checkPolicyMarks() error {
	protectedPages := 0
	for index := range a.table.highWater {
		if r := &a.table.records[index]; r.live && r.segment == segProtected {
			protectedPages += int(r.pages)
		}
	}
	if protectedPages != a.protectedPages ||
		(protectedPages != 0 && a.geometry.Policy != PolicySLRU) {
		return fmt.Errorf("the protected segment holds %d pages, counts %d, under %s",
			protectedPages, a.protectedPages, a.geometry.Policy)
	}
	used := 0
	for _, key := range a.seen {
		if key != 0 {
			used++
		}
	}
	if used != a.seenKeys {
		return fmt.Errorf("admit_seen's table holds %d keys, counts %d", used, a.seenKeys)
	}
	return nil
}
