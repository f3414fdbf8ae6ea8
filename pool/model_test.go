package pool

import (
	"slices"
	"testing"
)

// modelAllocator is a deliberately naive allocator with the same contract: a bool per slot, a slice
// of objects, linear scans and a sort for the eviction order, and each policy stated as plainly as
// it can be (a segment per object, rebalanced by a scan after every operation; a map of the keys
// seen). It is slow and obviously right; the real allocator must agree with it after every
// operation.
type modelAllocator struct {
	g          Geometry
	perSlab    int
	maxObjects int
	used       []bool
	objects    []modelObject
	// admit_seen: the key each bucket last saw; a bucket is the key's Mix64 modulo the number of
	// buckets, the least power of two of at least maxObjects
	seen map[uint64]uint64
	// SLRU: the most pages the evictable objects of the protected segment may hold
	protectedMax int
}

type modelObject struct {
	id         ObjectID
	seq, clock uint64
	committed  bool
	refs       int
	slots      []int // global slots in page order
	protected  bool  // SLRU: in the protected segment
}

func newModel(g Geometry) *modelAllocator {
	return &modelAllocator{
		g:          g,
		perSlab:    g.SlotsPerSlab(),
		maxObjects: g.maxObjects(),
		used:       make([]bool, g.Slots),
		seen:       map[uint64]uint64{},
		// 80% of the slots, in integer pages
		protectedMax: g.Slots * 80 / 100,
	}
}

// newModelPair builds an allocator and its model. Under SLRU the random streams seldom fill the
// protected segment to 80% of the slots (most objects are uncommitted, protected or gone), so a
// pair of an odd variant bounds it at a tenth of the slots in both, to demote often: the same code
// with another bound.
func newModelPair(t testing.TB, g Geometry, variant int) (*Allocator, *modelAllocator) {
	a, err := New(g)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(g)
	if g.Policy == PolicySLRU && variant%2 == 1 {
		a.protectedPagesMax, m.protectedMax = g.Slots/10, g.Slots/10
	}
	return a, m
}

// sight is admit_seen's doorkeeper: whether key's bucket held key, which it holds afterwards (key 0
// is stored as 1, as the allocator does).
func (m *modelAllocator) sight(key uint64) bool {
	buckets := uint64(1)
	for buckets < uint64(m.maxObjects) {
		buckets *= 2
	}
	bucket, entry := Mix64(key)%buckets, max(key, 1)
	seen := m.seen[bucket] == entry
	m.seen[bucket] = entry
	return seen
}

// demote is SLRU after a promotion: while the protected segment holds more than its bound of pages
// (every object in it counts, evictable or not), the least recently used of its evictable objects,
// (clock, id), goes back to probation, until none is left to demote.
func (m *modelAllocator) demote() {
	for {
		var oldest *modelObject
		pages := 0
		for i := range m.objects {
			o := &m.objects[i]
			if !o.protected {
				continue
			}
			pages += len(o.slots)
			if !o.committed || o.refs != 0 {
				continue
			}
			if oldest == nil || o.clock < oldest.clock ||
				o.clock == oldest.clock && o.id < oldest.id {
				oldest = o
			}
		}
		if pages <= m.protectedMax || oldest == nil {
			return
		}
		oldest.protected = false
	}
}

func (m *modelAllocator) find(id ObjectID) int {
	return slices.IndexFunc(m.objects, func(o modelObject) bool { return o.id == id })
}

func (m *modelAllocator) freeSlots() int {
	n := 0
	for _, used := range m.used {
		if !used {
			n++
		}
	}
	return n
}

func (m *modelAllocator) reserve(
	id ObjectID,
	pages int,
	seq, clock uint64,
	keyed bool,
	key uint64,
) (Outcome, []ObjectID, error) {
	if pages <= 0 || pages > m.g.Slots {
		return Miss, nil, ErrInvalidPages
	}
	if m.find(id) >= 0 {
		return Miss, nil, ErrDuplicateObject
	}
	fits := func() bool { return m.freeSlots() >= pages && len(m.objects) < m.maxObjects }
	if keyed && m.g.Policy == PolicyAdmitSeen && !m.sight(key) && !fits() {
		return Refused, nil, nil
	}
	outcome := Reserved
	var evicted []ObjectID
	if !fits() {
		candidates := m.evictionOrder()
		candidatePages := 0
		for _, o := range candidates {
			candidatePages += len(o.slots)
		}
		if m.freeSlots()+candidatePages < pages ||
			(len(m.objects) >= m.maxObjects && len(candidates) == 0) {
			return Miss, nil, nil
		}
		for _, victim := range candidates {
			if fits() {
				break
			}
			m.drop(victim.id)
			evicted = append(evicted, victim.id)
		}
		outcome = ReservedAfterEviction
	}
	o := modelObject{id: id, seq: seq, clock: clock}
	for s := 0; s < m.g.Slots && len(o.slots) < pages; s++ {
		if !m.used[s] {
			m.used[s] = true
			o.slots = append(o.slots, s)
		}
	}
	m.objects = append(m.objects, o)
	return outcome, evicted, nil
}

// evictionOrder lists the evictable objects (committed, unreferenced), sorted by segment (SLRU's
// probation first), clock and then id: the order in which reserve evicts them.
func (m *modelAllocator) evictionOrder() []modelObject {
	var candidates []modelObject
	for _, o := range m.objects {
		if o.committed && o.refs == 0 {
			candidates = append(candidates, o)
		}
	}
	slices.SortFunc(candidates, func(a, b modelObject) int {
		if a.protected != b.protected {
			if a.protected {
				return 1
			}
			return -1
		}
		if a.clock != b.clock {
			return cmpUint64(a.clock, b.clock)
		}
		return cmpUint64(uint64(a.id), uint64(b.id))
	})
	return candidates
}

// oldestEvictable is the model of Allocator.OldestEvictable: the shortest prefix of evictionOrder
// whose pages reach maxPages, or all of it.
func (m *modelAllocator) oldestEvictable(maxPages int) []ObjectID {
	var out []ObjectID
	for pages, candidates := 0, m.evictionOrder(); pages < maxPages && len(out) < len(candidates); {
		out = append(out, candidates[len(out)].id)
		pages += len(candidates[len(out)-1].slots)
	}
	return out
}

func cmpUint64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (m *modelAllocator) drop(id ObjectID) {
	i := m.find(id)
	for _, s := range m.objects[i].slots {
		m.used[s] = false
	}
	m.objects = slices.Delete(m.objects, i, i+1)
}

// extents cuts the object's slots into runs of consecutive slots of one slab.
func (m *modelAllocator) extents(o modelObject) []Extent {
	var out []Extent
	for i, s := range o.slots {
		slab, inSlab := s/m.perSlab, s%m.perSlab
		if i > 0 && s == o.slots[i-1]+1 && slab == o.slots[i-1]/m.perSlab {
			out[len(out)-1].Slots++
			continue
		}
		out = append(out, Extent{Slab: uint32(slab), FirstSlot: uint32(inSlab), Slots: 1})
	}
	return out
}

// apply runs one operation on the model and returns the same observable result as applyReal.
func (m *modelAllocator) apply(op operation) opResult {
	if op.kind == opReserve {
		outcome, evicted, err := m.reserve(op.id, op.pages, op.seq, op.clock, op.keyed, op.key)
		return opResult{outcome: outcome, evicted: evicted, err: err}
	}
	if op.kind == opReset {
		bound := m.protectedMax
		*m = *newModel(m.g)
		m.protectedMax = bound
		return opResult{}
	}
	i := m.find(op.id)
	if i < 0 {
		if op.kind == opAbort {
			return opResult{}
		}
		return opResult{err: ErrUnknownObject}
	}
	o := &m.objects[i]
	switch op.kind {
	case opAbort, opRelease, opEvict:
		switch {
		case op.kind == opAbort && o.committed:
			return opResult{err: ErrCommitted}
		case op.kind == opEvict && !o.committed:
			return opResult{err: ErrNotCommitted}
		case o.refs > 0:
			return opResult{err: ErrProtected}
		}
		m.drop(op.id)
	case opCommit:
		o.committed = true
	case opTouch:
		o.clock = op.clock
		if m.g.Policy == PolicySLRU && !o.protected {
			o.protected = true
			m.demote()
		}
	case opProtect:
		o.refs++
	case opUnprotect:
		if o.refs == 0 {
			return opResult{err: ErrNotProtected}
		}
		o.refs--
	}
	return opResult{}
}
