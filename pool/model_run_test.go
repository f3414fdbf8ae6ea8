package pool

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

// compareWithModel checks every observable of the real allocator against the model.
func compareWithModel(a *Allocator, m *modelAllocator, ids int) error {
	if a.Objects() != len(m.objects) || a.FreeSlots() != m.freeSlots() {
		return fmt.Errorf(
			"objects %d free %d, model objects %d free %d",
			a.Objects(),
			a.FreeSlots(),
			len(m.objects),
			m.freeSlots(),
		)
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
		want := ObjectInfo{
			Pages:     len(o.slots),
			Seq:       o.seq,
			Clock:     o.clock,
			Committed: o.committed,
			Refs:      o.refs,
			Protected: o.protected,
		}
		if info != want {
			return fmt.Errorf("object %d info %+v, model %+v", id, info, want)
		}
		if extents, _ := a.Extents(id); !slices.Equal(extents, m.extents(o)) {
			return fmt.Errorf("object %d extents %v, model %v", id, extents, m.extents(o))
		}
	}
	return a.CheckInvariants()
}

// runAgainstModel applies operations to both allocators and compares after each; it returns the
// number of operations run and how often each Reserve outcome happened.
func runAgainstModel(
	t testing.TB,
	g Geometry,
	src opSource,
	operations int,
	variant int,
) (int, [Refused + 1]int) {
	var outcomes [Refused + 1]int
	a, m := newModelPair(t, g, variant)
	const ids = 48
	for event := range operations {
		if src.done() {
			return event, outcomes
		}
		op := randomOperation(src, g, uint64(event), ids)
		got, want := applyReal(a, op), m.apply(op)
		if got.outcome != want.outcome || !slices.Equal(got.evicted, want.evicted) ||
			!errors.Is(got.err, want.err) ||
			(got.err == nil) != (want.err == nil) {
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
	{
		CPSize:           2,
		Layers:           2,
		PayloadsPerLayer: 2,
		PageTokens:       4,
		TokenBytes:       2,
		Slots:            64,
		SlabBytesMax:     1 << 20,
	},
	{
		CPSize:           8,
		Layers:           1,
		PayloadsPerLayer: 1,
		PageTokens:       1,
		TokenBytes:       1,
		Slots:            200,
		SlabBytesMax:     8 * 70,
	},
	{
		CPSize:           1,
		Layers:           1,
		PayloadsPerLayer: 1,
		PageTokens:       1,
		TokenBytes:       1,
		Slots:            9,
		SlabBytesMax:     1,
	},
	{
		CPSize:           4,
		Layers:           3,
		PayloadsPerLayer: 1,
		PageTokens:       2,
		TokenBytes:       1,
		Slots:            130,
		SlabBytesMax:     24 * 64,
		MaxObjects:       12,
		Layout:           PageFirst,
	},
}

// policyGeometries are the model geometries under each policy but LRU (modelGeometries' own).
func policyGeometries() []Geometry {
	var out []Geometry
	for _, p := range []Policy{PolicySLRU, PolicyAdmitSeen} {
		for _, g := range modelGeometries {
			g.Policy = p
			out = append(out, g)
		}
	}
	return out
}

// everyPolicyGeometry is modelGeometries followed by policyGeometries.
func everyPolicyGeometry() []Geometry {
	return append(slices.Clone(modelGeometries), policyGeometries()...)
}

// TestAllocatorAgainstModelMillionOperations: a million operations under LRU, and 200,000 under
// each other policy, each compared with the model after every operation.
func TestAllocatorAgainstModelMillionOperations(t *testing.T) {
	for i, g := range everyPolicyGeometry() {
		perGeometry := 1_000_000 / len(modelGeometries)
		if g.Policy != PolicyLRU {
			perGeometry /= 5
		}
		if testing.Short() {
			perGeometry /= 20
		}
		src := &splitmixSource{state: uint64(i) + 1}
		n, outcomes := runAgainstModel(t, g, src, perGeometry, i)
		if n != perGeometry {
			t.Fatalf("geometry %d ran %d operations, want %d", i, n, perGeometry)
		}
		// The stream must reach every outcome, or the comparison proves little; only admit_seen
		// refuses.
		for outcome, count := range outcomes {
			if (count == 0) == (Outcome(outcome) != Refused || g.Policy.Admits()) {
				t.Errorf("geometry %d (%s): %d Reserves ended %v", i, g.Policy, count,
					Outcome(outcome))
			}
		}
		t.Logf("geometry %d (%s): %d operations, reserve outcomes %v", i, g.Policy, n, outcomes)
	}
}

// TestAllocatorAgainstModelWithExpensiveChecks runs a shorter stream with every mutation checking
// the whole state, so that a break is caught inside the mutation (and between the evictions of one
// Reserve) rather than at the next comparison.
func TestAllocatorAgainstModelWithExpensiveChecks(t *testing.T) {
	withExpensiveChecks(t)
	perGeometry := 50_000
	if testing.Short() {
		perGeometry /= 20
	}
	for i, g := range everyPolicyGeometry() {
		src := &splitmixSource{state: uint64(i) + 100}
		if n, _ := runAgainstModel(t, g, src, perGeometry, i); n != perGeometry {
			t.Fatalf("geometry %d ran %d operations, want %d", i, n, perGeometry)
		}
	}
}

// FuzzAllocatorAgainstModel runs with expensive checks on, so each input is cut to fewer
// operations.
func FuzzAllocatorAgainstModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(
		[]byte("reserve commit release touch evict protect unprotect abort reset reserve reserve"),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		withExpensiveChecks(t)
		src := &bytesSource{data: data}
		runAgainstModel(t, fuzzGeometry(src), src, 1<<14, len(data))
	})
}

// fuzzGeometry draws one of the model geometries from the fuzzer's bytes, with fewer slots.
func fuzzGeometry(src *bytesSource) Geometry {
	g := modelGeometries[src.next(len(modelGeometries))]
	g.Policy = Policy(src.next(int(policyKinds)))
	g.Slots = 1 + src.next(g.Slots)
	if g.MaxObjects > g.Slots {
		g.MaxObjects = g.Slots
	}
	return g
}
