package pool

import (
	"fmt"
	"slices"
	"testing"
)

// The digest is a chain over the calls and what they decided, not a hash of the tables: the ranks
// compare it at every step, so every field of a placement must reach it, or a rank that placed an
// object differently in that field alone would look in step. These tests build twin allocators
// from one random history and make them differ in ONE field of one placement, by a call that sets
// that field differently or by a perturbation behind the digest's back (what a broken rank does),
// and require the digest to part as soon as the twins' states or placements do.

// twins replays one random history (fuzz-model operations, resets rare) into two allocators.
func twins(t *testing.T, g Geometry, seed uint64) (a, b *Allocator) {
	a, b = mustNew(t, g), mustNew(t, g)
	src := &splitmixSource{state: seed}
	for event := range uint64(src.next(400)) {
		op := randomOperation(src, g, event, 24)
		applyReal(a, op)
		applyReal(b, op)
	}
	if a.Digest() != b.Digest() || a.StateHash() != b.StateHash() {
		t.Fatalf("seed %d: one history gives two states", seed)
	}
	return a, b
}

// fieldCase makes twins differ in one field: it returns false where the state offers no case.
type fieldCase func(a, b *Allocator, src *splitmixSource) bool

// freshID is an id the random histories never use (they draw ids below 24).
const freshID ObjectID = 1 << 40

// reserveBoth reserves freshID on both twins, b's call changed by vary.
func reserveBoth(a, b *Allocator, src *splitmixSource, vary func(op *operation)) bool {
	op := operation{
		kind:  opReserve,
		id:    freshID,
		pages: 1 + src.next(max(1, a.geometry.Slots/3)),
		seq:   1 << 30,
		clock: 1 << 20,
		keyed: a.geometry.Policy.Admits(),
		key:   uint64(src.next(13)),
	}
	applyReal(a, op)
	vary(&op)
	applyReal(b, op)
	return true
}

// liveID is a live object of a's, drawn by src, whose record satisfies want.
func liveID(a *Allocator, src *splitmixSource, want func(r *object) bool) (ObjectID, bool) {
	var ids []ObjectID
	for index := range a.table.highWater {
		if r := &a.table.records[index]; r.live && want(r) {
			ids = append(ids, r.id)
		}
	}
	if len(ids) == 0 {
		return 0, false
	}
	return ids[src.next(len(ids))], true
}

// leakSlotAt is Perturb's leak at slot pos, which must be free, with no record: the bitmap loses
// one bit and its counts follow, as PerturbStateForTest does at the lowest free slot.
func leakSlotAt(a *Allocator, pos int) {
	slab := pos / a.slotsPerSlab
	a.bitmap.take(pos, pos+1)
	a.slabFreeSlots[slab]--
	a.slabLeakedSlots[slab]++
	a.freeSlots--
}

// callCases set one field of a placement by a call that b makes differently (or not at all).
var callCases = map[string]fieldCase{
	"object id": func(a, b *Allocator, src *splitmixSource) bool {
		return reserveBoth(a, b, src, func(op *operation) { op.id++ })
	},
	"span length (pages)": func(a, b *Allocator, src *splitmixSource) bool {
		return reserveBoth(a, b, src, func(op *operation) { op.pages++ })
	},
	"backup seq": func(a, b *Allocator, src *splitmixSource) bool {
		return reserveBoth(a, b, src, func(op *operation) { op.seq++ })
	},
	"LRU clock at reserve": func(a, b *Allocator, src *splitmixSource) bool {
		return reserveBoth(a, b, src, func(op *operation) { op.clock++ })
	},
	"LRU clock at touch": func(a, b *Allocator, src *splitmixSource) bool {
		id, ok := liveID(a, src, func(*object) bool { return true })
		return ok && a.Touch(id, 7) == nil && b.Touch(id, 8) == nil
	},
	"committed flag": func(a, b *Allocator, src *splitmixSource) bool {
		id, ok := liveID(a, src, func(r *object) bool { return !r.committed })
		return ok && a.MarkObjectCommitted(id) == nil
	},
	"protected (refs)": func(a, b *Allocator, src *splitmixSource) bool {
		id, ok := liveID(a, src, func(*object) bool { return true })
		return ok && a.Protect(id) == nil
	},
}

// TestDigestSeesEveryFieldACallSets: from random states, twins whose one call differs in one field
// of the placement it makes (or one of which makes the call) must end with different digests
// whenever their states differ, and every case must come up.
func TestDigestSeesEveryFieldACallSets(t *testing.T) {
	for name, vary := range callCases {
		seen := 0
		for i, g := range everyPolicyGeometry() {
			for seed := range uint64(300) {
				a, b := twins(t, g, uint64(i)<<32|seed)
				src := &splitmixSource{state: ^seed}
				if !vary(a, b, src) || a.StateHash() == b.StateHash() {
					continue
				}
				seen++
				if a.Digest() == b.Digest() {
					t.Fatalf("%s: geometry %d seed %d: the states differ, the digests do not",
						name, i, seed)
				}
			}
		}
		if seen < 100 {
			t.Errorf("%s: only %d states differed: the test proves little", name, seen)
		}
	}
}

// placementOf is what twins decided for freshID: its outcome, what it evicted and its extents.
type placementOf struct {
	outcome Outcome
	evicted []ObjectID
	extents []Extent
}

func reserveFresh(a *Allocator, pages int, key uint64) placementOf {
	outcome, err := a.ReserveAdmitted(freshID, pages, 1<<30, 1<<20, key)
	if err != nil {
		panic(err)
	}
	extents, _ := a.Extents(freshID)
	return placementOf{outcome, slices.Clone(a.Evicted()), slices.Clone(extents)}
}

// startsOnly says whether two placements differ in where their extents start and in nothing else.
func startsOnly(p, q placementOf) bool {
	if p.outcome != q.outcome || !slices.Equal(p.evicted, q.evicted) ||
		len(p.extents) != len(q.extents) || slices.Equal(p.extents, q.extents) {
		return false
	}
	for k := range p.extents {
		if p.extents[k].Slab != q.extents[k].Slab || p.extents[k].Slots != q.extents[k].Slots {
			return false
		}
	}
	return true
}

const (
	caseExtentStart  = "extent start (a free bit leaked)"
	caseExtentLength = "extent length (a bit inside a free run leaked)"
)

// perturbCase changes b's state behind the digest's back and returns the pages of the Reserve that
// both twins then make (through ReserveAdmitted, with the key it returns), or 0 where the state
// offers no case.
type perturbCase func(a, b *Allocator, src *splitmixSource) (pages int, key uint64)

// perturbCases are the perturbations of a placement's fields and of the policies' state.
var perturbCases = map[string]perturbCase{
	// the lowest free bit taken: the next placement starts one slot on
	caseExtentStart: func(a, b *Allocator, src *splitmixSource) (int, uint64) {
		if !b.PerturbStateForTest() || a.freeSlots < 2 {
			return 0, 0
		}
		return 1 + src.next(a.freeSlots-1), 0
	},
	// the slot after the lowest free one taken: the first extent keeps its start, not its length
	caseExtentLength: func(a, b *Allocator, src *splitmixSource) (int, uint64) {
		s := a.bitmap.nextFree(0)
		if s < 0 || a.freeSlots < 3 || (s+1)%a.slotsPerSlab == 0 || a.bitmap.search(s+1) != s+1 {
			return 0, 0
		}
		leakSlotAt(b, s+1)
		return 2 + src.next(a.freeSlots-2), 0
	},
	// the oldest evictable object made the newest: a Reserve that must evict chooses another
	"LRU clock (the oldest made newest)": func(a, b *Allocator, src *splitmixSource) (int, uint64) {
		if len(b.lru.items) < 2 || a.freeSlots >= a.geometry.Slots {
			return 0, 0
		}
		oldest := b.lru.items[0]
		b.table.records[oldest].clock = 1 << 50
		b.lru.fix(b.table.records, oldest)
		return a.freeSlots + 1, 0
	},
}

// perturbedTwins runs one perturbation case over random twins on every model geometry: it counts
// the Reserves that placed or evicted differently and those that differed in their starts alone,
// and returns an error for the first that kept one digest.
func perturbedTwins(
	t *testing.T,
	perturb perturbCase,
) (seen, startOnly int, err error) {
	for i, g := range everyPolicyGeometry() {
		// the policies' cases find fewer states to perturb: they get more seeds
		seeds := uint64(300)
		if g.Policy != PolicyLRU {
			seeds = 600
		}
		for seed := range seeds {
			a, b := twins(t, g, uint64(i)<<32|seed)
			pages, key := perturb(a, b, &splitmixSource{state: ^seed})
			if pages == 0 {
				continue
			}
			if a.Digest() != b.Digest() || a.StateHash() == b.StateHash() {
				t.Fatal("the perturbation chained a record, or changed no table")
			}
			pages = min(pages, a.geometry.Slots)
			p, q := reserveFresh(a, pages, key), reserveFresh(b, pages, key)
			if slices.Equal(p.evicted, q.evicted) && slices.Equal(p.extents, q.extents) &&
				p.outcome == q.outcome {
				continue
			}
			seen++
			if startsOnly(p, q) {
				startOnly++
			}
			if a.Digest() == b.Digest() && err == nil {
				err = fmt.Errorf("geometry %d seed %d: placed %+v and %+v under one digest",
					i, seed, p, q)
			}
		}
	}
	return seen, startOnly, err
}

// TestDigestSeesEveryFieldAPerturbationChanges: twins made to differ behind the digest's back keep
// one digest (the perturbation chains nothing) but not one state hash (StateHash walks the
// tables); the next Reserve, the same call on both, must part their digests whenever it places or
// evicts differently. Placements that differ only in where their extents start must come up: a
// digest without the start misses exactly those (simbugs' TestDigestFieldsCatchMissingStart).
func TestDigestSeesEveryFieldAPerturbationChanges(t *testing.T) {
	for name, perturb := range perturbCases {
		seen, startOnly, err := perturbedTwins(t, perturb)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%s: %d placements differed, %d in their starts alone", name, seen, startOnly)
		if seen < 100 {
			t.Errorf("%s: only %d placements differed: the test proves little", name, seen)
		}
		if name == caseExtentStart && startOnly < 10 {
			t.Errorf("%s: only %d placements differed in their starts alone", name, startOnly)
		}
	}
}

// TestDigestSeesEveryGeometryField: the parts of a slot (rank, layer, payload) and their byte
// layout are not in the replicated state at all, they are the geometry's, so they reach the digest
// through its seed: every geometry field changed alone must change FreshDigest.
func TestDigestSeesEveryGeometryField(t *testing.T) {
	base := modelGeometries[1]
	fields := map[string]func(g *Geometry){
		"cp size":            func(g *Geometry) { g.CPSize = 4 },
		"nodes":              func(g *Geometry) { g.Nodes = 2 },
		"layers":             func(g *Geometry) { g.Layers++ },
		"payloads per layer": func(g *Geometry) { g.PayloadsPerLayer++ },
		"page tokens":        func(g *Geometry) { g.PageTokens++ },
		"token bytes":        func(g *Geometry) { g.TokenBytes++ },
		"slots":              func(g *Geometry) { g.Slots++ },
		"slab bytes max":     func(g *Geometry) { g.SlabBytesMax += 8 },
		"layout":             func(g *Geometry) { g.Layout = PageFirst },
		"max objects":        func(g *Geometry) { g.MaxObjects = 50 },
		"policy slru":        func(g *Geometry) { g.Policy = PolicySLRU },
		"policy admit_seen":  func(g *Geometry) { g.Policy = PolicyAdmitSeen },
	}
	fresh := mustNew(t, base).FreshDigest()
	for name, change := range fields {
		g := base
		change(&g)
		if mustNew(t, g).FreshDigest() == fresh {
			t.Errorf("%s changed alone, the fresh digest did not", name)
		}
	}
}

// TestExtentRecordSeesEachWord: the extent record chains its slab, its first slot in the slab and
// its length, each alone; the slab is not redundant, slot 3 of slab 0 and of slab 1 differ.
func TestExtentRecordSeesEachWord(t *testing.T) {
	a := mustNew(t, modelGeometries[1])
	base := a.chainExtent(1, 1, 3, 5)
	for name, h := range map[string]uint64{
		"slab":   a.chainExtent(1, 0, 3, 5),
		"start":  a.chainExtent(1, 1, 4, 5),
		"length": a.chainExtent(1, 1, 3, 6),
	} {
		if h == base {
			t.Errorf("the extent record does not see its %s", name)
		}
	}
}

// TestStateHashSeesEveryFieldOfAPlacement: behind the digest, what covers the state itself is
// StateHash (the flush's check, and the simulator's comparison across ranks). From random states,
// each field of one live object's placement changed alone (record fields, extent length and link,
// the free bit of one of its slots) must change it, including the fields that no later operation
// shows the digest (seq above all).
func TestStateHashSeesEveryFieldOfAPlacement(t *testing.T) {
	fields := map[string]func(a *Allocator, r *object){
		"id":           func(a *Allocator, r *object) { r.id ^= 1 << 33 },
		"seq":          func(a *Allocator, r *object) { r.seq++ },
		"clock":        func(a *Allocator, r *object) { r.clock++ },
		"pages":        func(a *Allocator, r *object) { r.pages++ },
		"first slot":   func(a *Allocator, r *object) { r.firstSlot++ },
		"extent count": func(a *Allocator, r *object) { r.extentCount++ },
		"refs":         func(a *Allocator, r *object) { r.refs++ },
		"committed":    func(a *Allocator, r *object) { r.committed = !r.committed },
		"LRU link":     func(a *Allocator, r *object) { r.lruIndex++ },
		"SLRU segment": func(a *Allocator, r *object) { r.segment ^= 1 },
		"extent length": func(a *Allocator, r *object) {
			a.extentSlots[r.firstSlot]++
		},
		"extent link": func(a *Allocator, r *object) { a.extentNext[r.firstSlot] ^= 1 << 20 },
		"free bit of its first slot": func(a *Allocator, r *object) {
			a.bitmap.levels[0][r.firstSlot/wordBits] ^= 1 << (r.firstSlot % wordBits)
		},
	}
	for name, change := range fields {
		seen := 0
		for i, g := range everyPolicyGeometry() {
			for seed := range uint64(100) {
				a, b := twins(t, g, uint64(i)<<32|seed)
				src := &splitmixSource{state: seed}
				id, ok := liveID(a, src, func(*object) bool { return true })
				if !ok {
					continue
				}
				index, _ := b.table.find(id)
				change(b, &b.table.records[index])
				seen++
				if a.StateHash() == b.StateHash() {
					t.Fatalf("%s: geometry %d seed %d: changed alone, the state hash did not",
						name, i, seed)
				}
			}
		}
		if seen < 100 {
			t.Errorf("%s: only %d states had a live object", name, seen)
		}
	}
}
