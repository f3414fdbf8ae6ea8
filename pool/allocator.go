package pool

import (
	"errors"
	"fmt"
)

// ObjectID names a cached object (the run of pages of one radix-tree node); chosen by the caller.
type ObjectID uint64

// Extent is a run of consecutive slots of one slab: the half-open range [FirstSlot,
// FirstSlot+Slots).
type Extent struct {
	Slab      uint32
	FirstSlot uint32 // slot index inside the slab
	Slots     uint32
}

// Outcome says what Reserve did.
type Outcome uint8

const (
	Reserved              Outcome = iota // placed without evicting
	ReservedAfterEviction                // placed after evicting the objects listed by Evicted
	Miss                                 // could not be placed even after eviction; nothing changed
	// not admitted by the policy (ReserveAdmitted under admit_seen): nothing placed or evicted
	Refused
)

func (o Outcome) String() string {
	switch o {
	case Reserved:
		return "reserved"
	case ReservedAfterEviction:
		return "reserved_after_eviction"
	case Miss:
		return "miss"
	case Refused:
		return "refused"
	}
	return fmt.Sprintf("Outcome(%d)", uint8(o))
}

// ObjectInfo is what Lookup reports about a live object.
type ObjectInfo struct {
	Pages     int
	Seq       uint64
	Clock     uint64
	Committed bool
	Refs      int
	Protected bool // SLRU: in the protected segment
}

// Errors for caller misuse; they are wrapped with the object id. A misuse changes nothing.
var (
	ErrInvalidPages    = errors.New("pool: pages out of range")
	ErrDuplicateObject = errors.New("pool: object already reserved")
	ErrUnknownObject   = errors.New("pool: unknown object")
	ErrCommitted       = errors.New("pool: object is committed")
	ErrNotCommitted    = errors.New("pool: object is not committed")
	ErrProtected       = errors.New("pool: object is protected")
	ErrNotProtected    = errors.New("pool: object is not protected")
)

// noSlot ends an extent chain in Allocator.extentNext, which stores the next extent's first slot +
// 1.
const noSlot = 0

// Allocator is the deterministic slot allocator of one CP group's shared L2. See doc.go.
type Allocator struct {
	geometry        Geometry
	slotsPerSlab    int
	bitmap          freeBitmap
	slabFreeSlots   []uint32 // slabFreeSlots[slab] = free slots in slab; sum == freeSlots
	slabLeakedSlots []uint32 // slots taken by Perturb, per slab
	freeSlots       int
	table           objectTable
	// lru holds the evictable objects (committed, unreferenced) in (clock, id) order: all of them,
	// or under SLRU those of the probation segment, the protected segment's being in protected.
	lru               lruHeap
	lruPages          int // sum of pages of the evictable objects, both heaps
	protected         lruHeap
	protectedPages    int // sum of pages of the live objects in SLRU's protected segment
	protectedPagesMax int // SLRU's bound on protectedPages (policy.go); 0 under the others
	// admit_seen's direct-mapped table of the keys seen (policy.go), nil under the others, and
	// how many of its buckets hold one (so that Reset clears it only when used)
	seen     []uint64
	seenKeys int
	// the deliberate policy bug installed in this allocator (bugs_on.go; simbugs only)
	policyBug PolicyBug
	// For an extent starting at global slot s: extentSlots[s] is its length and extentNext[s] is
	// the next extent's first global slot + 1, or noSlot. Entries are zero everywhere else.
	extentSlots []uint32
	extentNext  []uint32
	extentBuf   []Extent
	evicted     []ObjectID
	digest      uint64
	freshDigest uint64
}

// New builds an allocator with every slot free. All tables are sized here from the geometry; large
// ones are fresh zero memory, so building one for 2^24 slots does not touch them.
func New(g Geometry) (*Allocator, error) {
	if err := g.Validate(); err != nil {
		return nil, err
	}
	maxObjects := g.maxObjects()
	a := &Allocator{
		geometry:        g,
		slotsPerSlab:    g.SlotsPerSlab(),
		bitmap:          newFreeBitmap(g.Slots),
		slabFreeSlots:   make([]uint32, g.SlabCount()),
		slabLeakedSlots: make([]uint32, g.SlabCount()),
		table:           newObjectTable(maxObjects),
		lru:             lruHeap{items: make([]uint32, 0, maxObjects)},
		seen:            make([]uint64, g.seenBuckets()),
		extentSlots:     make([]uint32, g.Slots),
		extentNext:      make([]uint32, g.Slots),
		extentBuf:       make([]Extent, 0, min(g.Slots, 1024)),
		evicted:         make([]ObjectID, 0, min(maxObjects, 1024)),
		freshDigest:     geometrySeed(g),
	}
	if g.Policy == PolicySLRU {
		a.protected.items = make([]uint32, 0, maxObjects)
		a.protectedPagesMax = g.protectedPagesMax()
	}
	a.adviseHugePages()
	a.resetCounters()
	return a, nil
}

// adviseHugePages asks for huge pages under the tables that grow with the pool
// (hugepages_linux.go).
func (a *Allocator) adviseHugePages() {
	adviseHugePages(a.table.buckets)
	adviseHugePages(a.table.records)
	adviseHugePages(a.lru.items)
	adviseHugePages(a.protected.items)
	adviseHugePages(a.seen)
	adviseHugePages(a.extentSlots)
	adviseHugePages(a.extentNext)
	for _, level := range a.bitmap.levels {
		adviseHugePages(level)
	}
}

// resetCounters sets everything that New and Reset share apart from the bitmap and the tables.
func (a *Allocator) resetCounters() {
	for slab := range a.slabFreeSlots {
		a.slabFreeSlots[slab] = uint32(a.geometry.SlabSlots(slab))
		a.slabLeakedSlots[slab] = 0
	}
	a.freeSlots = a.geometry.Slots
	a.lru.items = a.lru.items[:0]
	a.lruPages = 0
	a.protected.items = a.protected.items[:0]
	a.protectedPages = 0
	if a.seenKeys > 0 {
		clear(a.seen)
		a.seenKeys = 0
	}
	a.extentBuf = a.extentBuf[:0]
	a.evicted = a.evicted[:0]
	a.digest = a.freshDigest
}

// Geometry returns the geometry the allocator was built with.
func (a *Allocator) Geometry() Geometry { return a.geometry }

// Reserve places object id on `pages` slots, all or nothing. If the free slots or the object table
// do not suffice it evicts committed, unreferenced objects in the policy's order (LRU: (clock, id)
// ascending; SLRU: probation's, then protected's) until the request fits and places it
// (ReservedAfterEviction); Evicted lists them. When even evicting every evictable object could not
// make room it evicts nothing and returns Miss: a hopeless request must not empty the cache (and
// empties Evicted, chaining the miss into the digest). The error is only for misuse and then
// nothing changes, Evicted included. Reserve admits whatever the policy: ReserveAdmitted is the
// call that a policy may refuse.
func (a *Allocator) Reserve(id ObjectID, pages int, seq uint64, clock uint64) (Outcome, error) {
	if err := a.checkReserve(id, pages); err != nil {
		return Miss, err
	}
	a.evicted = a.evicted[:0]
	outcome := Reserved
	if !a.fits(pages) {
		if a.freeSlots+a.lruPages < pages || (a.table.full() && a.evictableObjects() == 0) {
			// A miss places nothing, but it empties the eviction list (state StateHash reads): it
			// chains, so that the digest still covers the whole state
			// (TestEqualDigestsMeanEqualStates).
			a.digest = digestAdd(a.digest, tagMiss, uint64(id), uint64(pages), seq, clock)
			return Miss, nil
		}
		// Bounded by the evictable objects: the check above guarantees room once all are gone.
		for !a.fits(pages) {
			victim := a.nextVictim()
			a.evicted = append(a.evicted, a.table.records[victim].id)
			a.evictRecord(victim)
		}
		outcome = ReservedAfterEviction
	}
	a.place(id, pages, seq, clock)
	return outcome, nil
}

// checkReserve refuses a misused Reserve: pages out of range, or an id already live.
func (a *Allocator) checkReserve(id ObjectID, pages int) error {
	if pages <= 0 || pages > a.geometry.Slots {
		return fmt.Errorf(
			"%w: object %d asks for %d pages, pool has %d slots",
			ErrInvalidPages,
			id,
			pages,
			a.geometry.Slots,
		)
	}
	if _, ok := a.table.find(id); ok {
		return fmt.Errorf("%w: object %d", ErrDuplicateObject, id)
	}
	return nil
}

func (a *Allocator) fits(pages int) bool { return a.freeSlots >= pages && !a.table.full() }

// place takes the `pages` lowest free slots for a new record: lowest address first, slab 0 first,
// so the placement is a pure function of the free set. Runs are cut at slab ends because an extent
// lies in one slab. The caller has checked that the slots and a record are there.
func (a *Allocator) place(id ObjectID, pages int, seq, clock uint64) {
	index := a.table.insert(id)
	r := &a.table.records[index]
	r.seq, r.clock, r.pages = seq, clock, uint32(pages)
	a.digest = digestAdd(a.digest, tagReserve, uint64(id), uint64(pages), seq, clock)
	remainingPages, previous, pos := pages, -1, 0
	for remainingPages > 0 {
		if pos = a.bitmap.nextFree(pos); pos < 0 {
			panic(
				a.broken(
					"place: free count says %d more free slots for object %d, bitmap has none",
					remainingPages,
					id,
				),
			)
		}
		slab := pos / a.slotsPerSlab
		run := a.bitmap.freeRun(pos, min(remainingPages, (slab+1)*a.slotsPerSlab-pos))
		a.bitmap.take(pos, pos+run)
		a.slabFreeSlots[slab] -= uint32(run)
		a.extentSlots[pos] = uint32(run)
		if previous < 0 {
			r.firstSlot = uint32(pos)
		} else {
			a.extentNext[previous] = uint32(pos) + 1
		}
		r.extentCount++
		a.digest = a.chainExtent(a.digest, slab, pos-slab*a.slotsPerSlab, run)
		previous, remainingPages, pos = pos, remainingPages-run, pos+run
	}
	a.freeSlots -= pages
	a.checkExpensive("reserve")
}

// chainExtent chains one extent of a placement: its slab, its first slot in the slab and its
// length, each of which a diverged rank may get wrong alone (digest_fields_test.go).
func (a *Allocator) chainExtent(h uint64, slab, first, run int) uint64 {
	if digestSkipsExtentStart() { // false except under simbugs' BreakDigestForTest
		return digestAdd(h, tagExtent, uint64(slab), uint64(run))
	}
	return digestAdd(h, tagExtent, uint64(slab), uint64(first), uint64(run))
}

// freeSlotsOf gives back every slot of record `index` and clears its extent chain.
func (a *Allocator) freeSlotsOf(index uint32) {
	r := &a.table.records[index]
	freedSlots := 0
	pos := int(r.firstSlot)
	for range r.extentCount {
		run := int(a.extentSlots[pos])
		if run == 0 {
			panic(a.broken("free: object %d extent at slot %d is empty", r.id, pos))
		}
		a.bitmap.give(pos, pos+run) // asserts that every slot of the extent was used
		a.slabFreeSlots[pos/a.slotsPerSlab] += uint32(run)
		next := a.extentNext[pos]
		a.extentSlots[pos], a.extentNext[pos] = 0, noSlot
		freedSlots += run
		pos = int(next) - 1
	}
	if freedSlots != int(r.pages) || pos != -1 {
		panic(
			a.broken(
				"free: object %d has %d pages, its extents hold %d (chain end %d)",
				r.id,
				r.pages,
				freedSlots,
				pos,
			),
		)
	}
	a.freeSlots += freedSlots
}

// drop frees record `index`, which must not be protected, and removes it from the LRU and the
// table.
func (a *Allocator) drop(index uint32) {
	r := &a.table.records[index]
	if r.lruIndex != 0 {
		a.removeEvictable(index)
	}
	if r.segment == segProtected {
		a.protectedPages -= int(r.pages)
	}
	a.freeSlotsOf(index)
	a.table.remove(index)
	a.checkExpensive("drop")
}

// evictRecord evicts an evictable record.
func (a *Allocator) evictRecord(index uint32) {
	a.digest = digestAdd(a.digest, tagEvict, uint64(a.table.records[index].id))
	a.drop(index)
}

// Evicted returns the ids evicted by the last Reserve, in eviction order. The slice is an internal
// buffer: it stays valid until the next mutation.
func (a *Allocator) Evicted() []ObjectID { return a.evicted }

// lookup finds a live record or returns ErrUnknownObject.
func (a *Allocator) lookup(id ObjectID) (uint32, error) {
	index, ok := a.table.find(id)
	if !ok {
		return 0, fmt.Errorf("%w: object %d", ErrUnknownObject, id)
	}
	return index, nil
}

// Reset returns to the state of New: every slot free, no objects, the fresh digest. It costs
// O(slots/64 + objects used since New), not a rebuild of the tables.
func (a *Allocator) Reset() {
	for index := range a.table.highWater {
		r := &a.table.records[index]
		for pos, n := int(r.firstSlot), r.extentCount; r.live && n > 0; n-- {
			next := a.extentNext[pos]
			a.extentSlots[pos], a.extentNext[pos] = 0, noSlot
			pos = int(next) - 1
		}
	}
	a.table.reset()
	if !resetSkipsBitmapFill.Load() { // false except under BreakResetForTest
		a.bitmap.fill()
	}
	a.resetCounters()
	a.checkExpensive("reset")
}
