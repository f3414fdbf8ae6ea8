package pool

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// modelAllocator is a deliberately naive allocator with the same contract: a bool per slot, a slice of
// objects, linear scans and a sort for the LRU order. It is slow and obviously right; the real
// allocator must agree with it after every operation.
type modelAllocator struct {
	g          Geometry
	perSlab    int
	maxObjects int
	used       []bool
	objects    []modelObject
}

type modelObject struct {
	id         ObjectID
	seq, clock uint64
	committed  bool
	refs       int
	slots      []int // global slots in page order
}

func newModel(g Geometry) *modelAllocator {
	return &modelAllocator{g: g, perSlab: g.SlotsPerSlab(), maxObjects: g.maxObjects(), used: make([]bool, g.Slots)}
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

func (m *modelAllocator) reserve(id ObjectID, pages int, seq, clock uint64) (Outcome, []ObjectID, error) {
	if pages <= 0 || pages > m.g.Slots {
		return Miss, nil, ErrInvalidPages
	}
	if m.find(id) >= 0 {
		return Miss, nil, ErrDuplicateObject
	}
	fits := func() bool { return m.freeSlots() >= pages && len(m.objects) < m.maxObjects }
	outcome := Reserved
	var evicted []ObjectID
	if !fits() {
		candidates := m.evictionOrder()
		candidatePages := 0
		for _, o := range candidates {
			candidatePages += len(o.slots)
		}
		if m.freeSlots()+candidatePages < pages || (len(m.objects) >= m.maxObjects && len(candidates) == 0) {
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

// evictionOrder lists the evictable objects (committed, unreferenced), sorted by clock and then id: the order
// in which reserve evicts them.
func (m *modelAllocator) evictionOrder() []modelObject {
	var candidates []modelObject
	for _, o := range m.objects {
		if o.committed && o.refs == 0 {
			candidates = append(candidates, o)
		}
	}
	slices.SortFunc(candidates, func(a, b modelObject) int {
		if a.clock != b.clock {
			return cmpUint64(a.clock, b.clock)
		}
		return cmpUint64(uint64(a.id), uint64(b.id))
	})
	return candidates
}

// oldestEvictable is the model of Allocator.OldestEvictable: the shortest prefix of evictionOrder whose pages
// reach maxPages, or all of it.
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
		outcome, evicted, err := m.reserve(op.id, op.pages, op.seq, op.clock)
		return opResult{outcome: outcome, evicted: evicted, err: err}
	}
	if op.kind == opReset {
		*m = *newModel(m.g)
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

type opKind uint8

const (
	opReserve opKind = iota
	opCommit
	opRelease
	opAbort
	opEvict
	opTouch
	opProtect
	opUnprotect
	opReset
	opKinds
)

type operation struct {
	kind       opKind
	id         ObjectID
	pages      int
	seq, clock uint64
}

type opResult struct {
	outcome Outcome
	evicted []ObjectID
	err     error
}

// applyReal runs one operation on the real allocator.
func applyReal(a *Allocator, op operation) opResult {
	var err error
	switch op.kind {
	case opReserve:
		outcome, err := a.Reserve(op.id, op.pages, op.seq, op.clock)
		return opResult{outcome: outcome, evicted: slices.Clone(a.Evicted()), err: err}
	case opCommit:
		err = a.MarkObjectCommitted(op.id)
	case opRelease:
		err = a.Release(op.id)
	case opAbort:
		err = a.Abort(op.id)
	case opEvict:
		err = a.Evict(op.id)
	case opTouch:
		err = a.Touch(op.id, op.clock)
	case opProtect:
		err = a.Protect(op.id)
	case opUnprotect:
		err = a.Unprotect(op.id)
	case opReset:
		a.Reset()
	}
	return opResult{err: err}
}

// opSource yields small numbers: from a seeded generator, or from fuzz bytes.
type opSource interface {
	next(n int) int // in [0, n)
	done() bool
}

// splitmixSource is a test-only deterministic generator (the package itself uses no randomness).
type splitmixSource struct{ state uint64 }

func (s *splitmixSource) next(n int) int {
	s.state += 0x9e3779b97f4a7c15
	return int(Mix64(s.state) % uint64(n))
}
func (s *splitmixSource) done() bool { return false }

type bytesSource struct{ data []byte }

func (s *bytesSource) next(n int) int {
	if len(s.data) < 2 {
		s.data = nil
		return 0
	}
	v := int(s.data[0])<<8 | int(s.data[1])
	s.data = s.data[2:]
	return v % n
}
func (s *bytesSource) done() bool { return len(s.data) == 0 }

// randomOperation draws an operation that mostly makes sense (ids from a small set, so duplicates,
// unknown ids and repeated commits happen), with resets rare so that states grow full and fragmented.
func randomOperation(src opSource, g Geometry, event uint64, ids int) operation {
	// Several events share a clock value, so LRU ties (broken by id) are common.
	op := operation{id: ObjectID(src.next(ids)), seq: event, clock: event / 8}
	switch roll := src.next(100); {
	case roll < 35:
		op.kind = opReserve
		op.pages = 1 + src.next(max(1, g.Slots/4))
		if src.next(50) == 0 {
			op.pages = src.next(g.Slots+3) - 1 // sometimes invalid: <= 0 or > Slots
		}
	case roll < 55:
		op.kind = opCommit
	case roll < 65:
		op.kind = opRelease
	case roll < 72:
		op.kind = opAbort
	case roll < 77:
		op.kind = opEvict
	case roll < 87:
		op.kind = opTouch
		op.clock = uint64(src.next(int(event/8) + 1)) // clocks may repeat and go back: ties by id
	case roll < 93:
		op.kind = opProtect
	case roll < 99 || src.next(200) != 0:
		op.kind = opUnprotect
	default:
		op.kind = opReset
	}
	return op
}

// compareWithModel checks every observable of the real allocator against the model.
func compareWithModel(a *Allocator, m *modelAllocator, ids int) error {
	if a.Objects() != len(m.objects) || a.FreeSlots() != m.freeSlots() {
		return fmt.Errorf("objects %d free %d, model objects %d free %d", a.Objects(), a.FreeSlots(), len(m.objects), m.freeSlots())
	}
	for slab := range a.geometry.SlabCount() {
		modelFree := 0
		for s := slab * m.perSlab; s < slab*m.perSlab+a.geometry.SlabSlots(slab); s++ {
			if !m.used[s] {
				modelFree++
			}
		}
		if a.FreeSlotsInSlab(slab) != modelFree {
			return fmt.Errorf("slab %d free %d, model %d", slab, a.FreeSlotsInSlab(slab), modelFree)
		}
	}
	for id := range ObjectID(ids) {
		info, ok := a.Lookup(id)
		i := m.find(id)
		if ok != (i >= 0) {
			return fmt.Errorf("object %d live %v, model %v", id, ok, i >= 0)
		}
		if !ok {
			continue
		}
		o := m.objects[i]
		want := ObjectInfo{Pages: len(o.slots), Seq: o.seq, Clock: o.clock, Committed: o.committed, Refs: o.refs}
		if info != want {
			return fmt.Errorf("object %d info %+v, model %+v", id, info, want)
		}
		if extents, _ := a.Extents(id); !slices.Equal(extents, m.extents(o)) {
			return fmt.Errorf("object %d extents %v, model %v", id, extents, m.extents(o))
		}
	}
	return a.CheckInvariants()
}

// runAgainstModel applies operations to both allocators and compares after each; it returns the number
// of operations run and how often each Reserve outcome happened.
func runAgainstModel(t testing.TB, g Geometry, src opSource, operations int) (int, [Miss + 1]int) {
	var outcomes [Miss + 1]int
	a, err := New(g)
	if err != nil {
		t.Fatal(err)
	}
	m := newModel(g)
	const ids = 48
	for event := range operations {
		if src.done() {
			return event, outcomes
		}
		op := randomOperation(src, g, uint64(event), ids)
		got, want := applyReal(a, op), m.apply(op)
		if got.outcome != want.outcome || !slices.Equal(got.evicted, want.evicted) || !errors.Is(got.err, want.err) || (got.err == nil) != (want.err == nil) {
			t.Fatalf("event %d %+v: got %v evicted %v err %v; model %v evicted %v err %v",
				event, op, got.outcome, got.evicted, got.err, want.outcome, want.evicted, want.err)
		}
		if err := compareWithModel(a, m, ids); err != nil {
			t.Fatalf("event %d %+v: %v", event, op, err)
		}
		if op.kind == opReserve && got.err == nil {
			outcomes[got.outcome]++
		}
	}
	return operations, outcomes
}

// modelGeometries cover one slab, several slabs with a smaller last one, slabs of one slot, and an
// object table smaller than the slot count.
var modelGeometries = []Geometry{
	{CPSize: 2, Layers: 2, PayloadsPerLayer: 2, PageTokens: 4, TokenBytes: 2, Slots: 64, SlabBytesMax: 1 << 20},
	{CPSize: 8, Layers: 1, PayloadsPerLayer: 1, PageTokens: 1, TokenBytes: 1, Slots: 200, SlabBytesMax: 8 * 70},
	{CPSize: 1, Layers: 1, PayloadsPerLayer: 1, PageTokens: 1, TokenBytes: 1, Slots: 9, SlabBytesMax: 1},
	{CPSize: 4, Layers: 3, PayloadsPerLayer: 1, PageTokens: 2, TokenBytes: 1, Slots: 130, SlabBytesMax: 24 * 64, MaxObjects: 12, Layout: PageFirst},
}

func TestAllocatorAgainstModelMillionOperations(t *testing.T) {
	perGeometry := 1_000_000 / len(modelGeometries)
	if testing.Short() {
		perGeometry /= 20
	}
	for i, g := range modelGeometries {
		src := &splitmixSource{state: uint64(i) + 1}
		n, outcomes := runAgainstModel(t, g, src, perGeometry)
		if n != perGeometry {
			t.Fatalf("geometry %d ran %d operations, want %d", i, n, perGeometry)
		}
		// The stream must reach every outcome, or the comparison proves little.
		for outcome, count := range outcomes {
			if count == 0 {
				t.Errorf("geometry %d: no Reserve ended %v", i, Outcome(outcome))
			}
		}
		t.Logf("geometry %d: %d operations, reserve outcomes %v", i, n, outcomes)
	}
}

// TestAllocatorAgainstModelWithExpensiveChecks runs a shorter stream with every mutation checking the
// whole state, so that a break is caught inside the mutation (and between the evictions of one Reserve)
// rather than at the next comparison.
func TestAllocatorAgainstModelWithExpensiveChecks(t *testing.T) {
	withExpensiveChecks(t)
	perGeometry := 50_000
	if testing.Short() {
		perGeometry /= 20
	}
	for i, g := range modelGeometries {
		src := &splitmixSource{state: uint64(i) + 100}
		if n, _ := runAgainstModel(t, g, src, perGeometry); n != perGeometry {
			t.Fatalf("geometry %d ran %d operations, want %d", i, n, perGeometry)
		}
	}
}

// FuzzAllocatorAgainstModel runs with expensive checks on, so each input is cut to fewer operations.
func FuzzAllocatorAgainstModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte("reserve commit release touch evict protect unprotect abort reset reserve reserve"))
	f.Fuzz(func(t *testing.T, data []byte) {
		withExpensiveChecks(t)
		src := &bytesSource{data: data}
		runAgainstModel(t, fuzzGeometry(src), src, 1<<14)
	})
}

// fuzzGeometry draws one of the model geometries from the fuzzer's bytes, with fewer slots.
func fuzzGeometry(src *bytesSource) Geometry {
	g := modelGeometries[src.next(len(modelGeometries))]
	g.Slots = 1 + src.next(g.Slots)
	if g.MaxObjects > g.Slots {
		g.MaxObjects = g.Slots
	}
	return g
}
