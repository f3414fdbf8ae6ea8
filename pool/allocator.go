package pool

import (
	"errors"
	"fmt"
)

// ObjectID names a cached object (the run of pages of one radix-tree node); chosen by the caller.
type ObjectID uint64

// Extent is a run of consecutive slots of one slab: the half-open range [FirstSlot, FirstSlot+Slots).
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
)

func (o Outcome) String() string {
	switch o {
	case Reserved:
		return "reserved"
	case ReservedAfterEviction:
		return "reserved_after_eviction"
	case Miss:
		return "miss"
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

// noSlot ends an extent chain in Allocator.extentNext, which stores the next extent's first slot + 1.
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
	lru             lruHeap
	lruPages        int // sum of pages of the objects in lru
	// For an extent starting at global slot s: extentSlots[s] is its length and extentNext[s] is the
	// next extent's first global slot + 1, or noSlot. Entries are zero everywhere else.
	extentSlots []uint32
	extentNext  []uint32
	extentBuf   []Extent
	evicted     []ObjectID
	digest      uint64
	freshDigest uint64
}

// New builds an allocator with every slot free. All tables are sized here from the geometry; large ones
// are fresh zero memory, so building one for 2^24 slots does not touch them.
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
		extentSlots:     make([]uint32, g.Slots),
		extentNext:      make([]uint32, g.Slots),
		extentBuf:       make([]Extent, 0, min(g.Slots, 1024)),
		evicted:         make([]ObjectID, 0, min(maxObjects, 1024)),
		freshDigest:     geometrySeed(g),
	}
	a.adviseHugePages()
	a.resetCounters()
	return a, nil
}

// adviseHugePages asks for huge pages under the tables that grow with the pool (hugepages_linux.go).
func (a *Allocator) adviseHugePages() {
	adviseHugePages(a.table.buckets)
	adviseHugePages(a.table.records)
	adviseHugePages(a.lru.items)
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
	a.extentBuf = a.extentBuf[:0]
	a.evicted = a.evicted[:0]
	a.digest = a.freshDigest
}

// Geometry returns the geometry the allocator was built with.
func (a *Allocator) Geometry() Geometry { return a.geometry }

// Reserve places object id on `pages` slots, all or nothing. If the free slots or the object table do
// not suffice it evicts committed, unreferenced objects in LRU order ((clock, id) ascending) until the
// request fits and places it (ReservedAfterEviction); Evicted lists them. When even evicting every
// evictable object could not make room it evicts nothing and returns Miss: a hopeless request must not
// empty the cache. The error is only for misuse and then nothing changes.
func (a *Allocator) Reserve(id ObjectID, pages int, seq uint64, clock uint64) (Outcome, error) {
	a.evicted = a.evicted[:0]
	if pages <= 0 || pages > a.geometry.Slots {
		return Miss, fmt.Errorf("%w: object %d asks for %d pages, pool has %d slots", ErrInvalidPages, id, pages, a.geometry.Slots)
	}
	if _, ok := a.table.find(id); ok {
		return Miss, fmt.Errorf("%w: object %d", ErrDuplicateObject, id)
	}
	outcome := Reserved
	if !a.fits(pages) {
		if a.freeSlots+a.lruPages < pages || (a.table.full() && len(a.lru.items) == 0) {
			return Miss, nil
		}
		// Bounded by the evictable objects: the check above guarantees room once all are gone.
		for !a.fits(pages) {
			victim := a.lru.items[0]
			a.evicted = append(a.evicted, a.table.records[victim].id)
			a.evictRecord(victim)
		}
		outcome = ReservedAfterEviction
	}
	a.place(id, pages, seq, clock)
	return outcome, nil
}

func (a *Allocator) fits(pages int) bool { return a.freeSlots >= pages && !a.table.full() }

// place takes the `pages` lowest free slots for a new record: lowest address first, slab 0 first, so the
// placement is a pure function of the free set. Runs are cut at slab ends because an extent lies in one
// slab. The caller has checked that the slots and a record are there.
func (a *Allocator) place(id ObjectID, pages int, seq, clock uint64) {
	index := a.table.insert(id)
	r := &a.table.records[index]
	r.seq, r.clock, r.pages = seq, clock, uint32(pages)
	a.digest = digestAdd(a.digest, tagReserve, uint64(id), uint64(pages), seq, clock)
	remainingPages, previous, pos := pages, -1, 0
	for remainingPages > 0 {
		if pos = a.bitmap.nextFree(pos); pos < 0 {
			panic(a.broken("place: free count says %d more free slots for object %d, bitmap has none", remainingPages, id))
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
		a.digest = digestAdd(a.digest, tagExtent, uint64(slab), uint64(pos-slab*a.slotsPerSlab), uint64(run))
		previous, remainingPages, pos = pos, remainingPages-run, pos+run
	}
	a.freeSlots -= pages
	a.checkExpensive("reserve")
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
		panic(a.broken("free: object %d has %d pages, its extents hold %d (chain end %d)", r.id, r.pages, freedSlots, pos))
	}
	a.freeSlots += freedSlots
}

// drop frees record `index`, which must not be protected, and removes it from the LRU and the table.
func (a *Allocator) drop(index uint32) {
	r := &a.table.records[index]
	if r.lruIndex != 0 {
		a.lruPages -= int(r.pages)
		a.lru.remove(a.table.records, index)
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

// Abort rolls back an uncommitted reservation. Aborting an absent id is a no-op, so a rollback can be
// repeated; aborting a committed or protected object is misuse.
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
// unreferenced. Committing a committed object is a no-op: writing_check may report an old seq again.
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

// updateEvictable puts record `index` into the LRU or takes it out, to match committed && refs == 0.
func (a *Allocator) updateEvictable(index uint32) {
	r := &a.table.records[index]
	want := r.committed && r.refs == 0
	switch {
	case want && r.lruIndex == 0:
		a.lru.push(a.table.records, index)
		a.lruPages += int(r.pages)
	case !want && r.lruIndex != 0:
		a.lru.remove(a.table.records, index)
		a.lruPages -= int(r.pages)
	}
	a.checkExpensive("commit, protect or unprotect")
}

// Release drops an object, committed or not, and frees its slots. A protected object is being loaded
// from its slots, so releasing it is misuse.
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

// Touch sets the object's LRU clock to the logical clock of an access.
func (a *Allocator) Touch(id ObjectID, clock uint64) error {
	index, err := a.lookup(id)
	if err != nil {
		return err
	}
	r := &a.table.records[index]
	r.clock = clock
	a.digest = digestAdd(a.digest, tagTouch, uint64(id), clock)
	if r.lruIndex != 0 {
		a.lru.fix(a.table.records, index)
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

// Extents returns the object's extents in page order. The slice is an internal buffer, valid until the
// next call or mutation; it only grows (allocates) for an object with more extents than ever before.
func (a *Allocator) Extents(id ObjectID) ([]Extent, bool) {
	index, ok := a.table.find(id)
	if !ok {
		return nil, false
	}
	r := &a.table.records[index]
	a.extentBuf = a.extentBuf[:0]
	for pos, n := int(r.firstSlot), r.extentCount; n > 0; n-- {
		slab := pos / a.slotsPerSlab
		a.extentBuf = append(a.extentBuf, Extent{Slab: uint32(slab), FirstSlot: uint32(pos - slab*a.slotsPerSlab), Slots: a.extentSlots[pos]})
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
	return ObjectInfo{Pages: int(r.pages), Seq: r.seq, Clock: r.clock, Committed: r.committed, Refs: int(r.refs)}, true
}

// Digest is the order-sensitive chain over every mutation since New or Reset.
func (a *Allocator) Digest() uint64 { return a.digest }

// FreshDigest is the digest of New and of Reset: a function of the geometry only.
func (a *Allocator) FreshDigest() uint64 { return a.freshDigest }

// PlacementHash hashes the object's id and extents, for comparing one placement across ranks; 0 if the
// object is absent.
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

// Perturb is FOR FAULT INJECTION ONLY: it makes this allocator diverge as a broken rank would, so that
// tests and the `validate` command can show that the placement assert catches divergence. It leaks the
// lowest free slot (later placements shift, so the divergence shows in placements too) and chains a tag
// into the digest. CheckInvariants accounts for leaked slots; Reset forgets them.
func (a *Allocator) Perturb() {
	a.digest = digestAdd(a.digest, tagPerturb)
	pos := a.bitmap.nextFree(0)
	if pos < 0 {
		return
	}
	slab := pos / a.slotsPerSlab
	a.bitmap.take(pos, pos+1)
	a.slabFreeSlots[slab]--
	a.slabLeakedSlots[slab]++
	a.freeSlots--
	a.checkExpensive("perturb")
}

// TableBytes is what New(g) allocates for its tables (Allocator.TableBytes), computed without allocating, so that
// a caller can refuse a pool whose tables cannot fit in memory before trying. g must be valid.
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
		int64(bucketsFor(int(maxObjects)))*8 + min(int64(g.Slots), 1024)*extentBytes + min(maxObjects, 1024)*8
}

// TableBytes is the size of every table New allocated: address space, of which the OS backs only the
// pages the allocator has touched. It is about 8.1 bytes per slot plus 68 bytes per MaxObjects.
func (a *Allocator) TableBytes() int64 {
	total := int64(len(a.slabFreeSlots)+len(a.slabLeakedSlots)) * 4
	for _, level := range a.bitmap.levels {
		total += int64(len(level)) * 8
	}
	total += int64(len(a.extentSlots)+len(a.extentNext)+cap(a.lru.items)) * 4
	total += int64(len(a.table.records))*objectBytes + int64(len(a.table.buckets))*8
	return total + int64(cap(a.extentBuf))*extentBytes + int64(cap(a.evicted))*8
}
