package pool

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
)

// checkOldestEvictable compares OldestEvictable with the model for several page budgets (none,
// negative, one, one drawn from src, exactly the evictable pages, more than all), checks that it
// changes neither Digest nor StateHash, and that a walk of the LRU heap visits every evictable
// record in the model's order with a frontier of at most visits+1 positions (the O(k log k) bound).
func checkOldestEvictable(
	a *Allocator,
	m *modelAllocator,
	src opSource,
	buf []ObjectID,
) ([]ObjectID, error) {
	digest, state := a.Digest(), a.StateHash()
	order := m.evictionOrder()
	for _, maxPages := range []int{
		math.MinInt, -1, 0, 1, 1 + src.next(a.lruPages+2), a.lruPages, a.lruPages + 1, math.MaxInt,
	} {
		buf = append(buf[:0], 1<<40, 1<<41) // contents OldestEvictable must overwrite
		got, want := a.OldestEvictable(maxPages, buf), m.oldestEvictable(maxPages)
		if !slices.Equal(got, want) {
			return buf, fmt.Errorf(
				"OldestEvictable(%d) = %v, model %v (evictable %d objects, %d pages)",
				maxPages,
				got,
				want,
				len(order),
				a.lruPages,
			)
		}
		if maxPages <= 0 && len(got) != 0 {
			return buf, fmt.Errorf("OldestEvictable(%d) = %v, want empty", maxPages, got)
		}
		if a.Digest() != digest {
			return buf, fmt.Errorf("OldestEvictable(%d) changed the digest", maxPages)
		}
	}
	if a.StateHash() != state { // one pass over every table: once for all the calls above
		return buf, fmt.Errorf("OldestEvictable changed the state hash")
	}
	visits := 0
	for _, h := range []*lruHeap{&a.lru, &a.protected} { // SLRU's probation, then protected
		var err error
		if visits, err = checkWalk(a, h, order, visits); err != nil {
			return buf, err
		}
	}
	if visits != len(order) {
		return buf, fmt.Errorf("walks visited %d records, model has %d evictable", visits,
			len(order))
	}
	return buf, nil
}

// checkWalk walks heap h, whose records must be order[from:] up to the walk's length, with a
// frontier of at most visits+1 positions; it returns from plus the records visited.
func checkWalk(a *Allocator, h *lruHeap, order []modelObject, from int) (int, error) {
	walk := newLRUWalk(h, nil)
	for visits := 0; ; visits++ {
		if len(walk) > visits+1 {
			return 0, fmt.Errorf(
				"after %d visits the walk's frontier holds %d positions",
				visits,
				len(walk),
			)
		}
		var index uint32
		var ok bool
		if walk, index, ok = walk.next(h, a.table.records); !ok {
			return from + visits, nil
		}
		if from+visits >= len(order) || a.table.records[index].id != order[from+visits].id {
			return 0, fmt.Errorf(
				"walk visit %d is object %d, model order %v",
				from+visits,
				a.table.records[index].id,
				order,
			)
		}
	}
}

// runOldestEvictableAgainstModel is runAgainstModel with OldestEvictable checked after every
// operation, and every Reserve that evicts checked to evict exactly what OldestEvictable listed
// just before it: the pages it lacked, or at least one object when only the full object table
// forced the eviction.
func runOldestEvictableAgainstModel(
	t testing.TB,
	g Geometry,
	src opSource,
	operations int,
	variant int,
) (ran, evictingReserves int) {
	a, m := newModelPair(t, g, variant)
	const ids = 48
	var buf, predicted []ObjectID
	var err error
	for event := range operations {
		if src.done() {
			return event, evictingReserves
		}
		op := randomOperation(src, g, uint64(event), ids)
		if op.kind == opReserve {
			lacking := op.pages - a.FreeSlots()
			if a.Objects() >= g.maxObjects() {
				lacking = max(lacking, 1)
			}
			predicted = a.OldestEvictable(lacking, predicted)
		}
		got, want := applyReal(a, op), m.apply(op)
		if got.outcome != want.outcome || !slices.Equal(got.evicted, want.evicted) ||
			!errors.Is(got.err, want.err) ||
			(got.err == nil) != (want.err == nil) {
			t.Fatalf("event %d %+v: got %v evicted %v err %v; model %v evicted %v err %v",
				event, op, got.outcome, got.evicted, got.err, want.outcome, want.evicted, want.err)
		}
		if op.kind == opReserve && got.err == nil && got.outcome == ReservedAfterEviction {
			evictingReserves++
			if !slices.Equal(got.evicted, predicted) {
				t.Fatalf(
					"event %d %+v: evicted %v, OldestEvictable before it listed %v",
					event,
					op,
					got.evicted,
					predicted,
				)
			}
		}
		if err := compareWithModel(a, m, ids); err != nil {
			t.Fatalf("event %d %+v: %v", event, op, err)
		}
		if buf, err = checkOldestEvictable(a, m, src, buf); err != nil {
			t.Fatalf("event %d %+v: %v", event, op, err)
		}
	}
	return operations, evictingReserves
}

func TestOldestEvictableAgainstModel(t *testing.T) {
	perGeometry := 50_000
	if testing.Short() {
		perGeometry /= 10
	}
	for i, g := range everyPolicyGeometry() {
		src := &splitmixSource{state: uint64(i) + 7000}
		n, evicting := runOldestEvictableAgainstModel(t, g, src, perGeometry, i)
		if n != perGeometry || evicting == 0 {
			t.Fatalf(
				"geometry %d ran %d operations (want %d), %d reserves evicted",
				i,
				n,
				perGeometry,
				evicting,
			)
		}
		t.Logf("geometry %d (%s): %d operations, %d evicting reserves", i, g.Policy, n, evicting)
	}
}

// TestOldestEvictableIsTheEvictionOrder takes random states, lists every evictable object, then
// reserves fresh uncommitted objects (of one to three pages, one when a larger one misses) until a
// Reserve misses: the objects evicted on the way, in order, must be exactly the list.
func TestOldestEvictableIsTheEvictionOrder(t *testing.T) {
	for i, g := range everyPolicyGeometry() {
		src := &splitmixSource{state: uint64(i) + 9000}
		for trial := range 200 {
			a, err := New(g)
			if err != nil {
				t.Fatal(err)
			}
			for event := range src.next(400) {
				applyReal(a, randomOperation(src, g, uint64(event), 48))
			}
			digest, state := a.Digest(), a.StateHash()
			list := a.OldestEvictable(math.MaxInt, nil)
			if a.Digest() != digest || a.StateHash() != state {
				t.Fatalf("geometry %d trial %d: OldestEvictable changed the state", i, trial)
			}
			var evicted []ObjectID
			for id := ObjectID(1 << 20); ; id++ {
				outcome, err := a.Reserve(id, 1+src.next(3), 0, math.MaxUint64)
				if err == nil && outcome == Miss {
					outcome, err = a.Reserve(id, 1, 0, math.MaxUint64)
				}
				if err != nil {
					t.Fatal(err)
				}
				if outcome == Miss {
					break
				}
				evicted = append(evicted, a.Evicted()...)
				if !slices.Equal(evicted, list[:min(len(evicted), len(list))]) {
					t.Fatalf(
						"geometry %d trial %d: evicted %v, OldestEvictable listed %v",
						i,
						trial,
						evicted,
						list,
					)
				}
			}
			if !slices.Equal(evicted, list) {
				t.Fatalf(
					"geometry %d trial %d: evicted %v before missing, OldestEvictable listed %v",
					i,
					trial,
					evicted,
					list,
				)
			}
		}
	}
}

func TestOldestEvictableByHand(t *testing.T) {
	a := newTestAllocator(t, 16)
	// (id, pages, clock): (clock, id) order is 12, 11, 14, 10, 15; 13 is protected and 16
	// uncommitted.
	for _, o := range []struct {
		id    ObjectID
		pages int
		clock uint64
	}{{10, 2, 9}, {11, 1, 3}, {12, 3, 2}, {13, 1, 1}, {14, 2, 3}, {15, 1, 9}, {16, 1, 0}} {
		mustReserve(t, a, o.id, o.pages, o.clock)
		if o.id != 16 {
			if err := a.MarkObjectCommitted(o.id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Protect(13); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		maxPages int
		want     []ObjectID
	}{
		{math.MinInt, nil}, {-3, nil}, {0, nil},
		{1, []ObjectID{12}}, {3, []ObjectID{12}}, {4, []ObjectID{12, 11}},
		{5, []ObjectID{12, 11, 14}}, {6, []ObjectID{12, 11, 14}}, {7, []ObjectID{12, 11, 14, 10}},
		{
			8,
			[]ObjectID{12, 11, 14, 10},
		}, {9, []ObjectID{12, 11, 14, 10, 15}}, {100, []ObjectID{12, 11, 14, 10, 15}},
	}
	digest, state := a.Digest(), a.StateHash()
	for _, c := range cases {
		into := []ObjectID{99, 98, 97}
		got := a.OldestEvictable(c.maxPages, into)
		if !slices.Equal(got, c.want) {
			t.Errorf("OldestEvictable(%d) = %v, want %v", c.maxPages, got, c.want)
		}
		if len(got) > 0 && len(got) <= cap(into) && &got[0] != &into[0] {
			t.Errorf("OldestEvictable(%d) did not reuse into", c.maxPages)
		}
	}
	if a.Digest() != digest || a.StateHash() != state {
		t.Fatalf("OldestEvictable changed the digest or the state hash")
	}
	// Touching 12 sends it last; the next Reserve that lacks 3 pages evicts what the list said.
	if err := a.Touch(12, 20); err != nil {
		t.Fatal(err)
	}
	if got := a.OldestEvictable(3, nil); !slices.Equal(got, []ObjectID{11, 14}) {
		t.Fatalf("after touching 12: %v, want [11 14]", got)
	}
	if free := a.FreeSlots(); free != 5 {
		t.Fatalf("free %d, want 5", free)
	}
	if got := mustReserve(t, a, 30, 8, 21); got != ReservedAfterEviction ||
		!slices.Equal(a.Evicted(), []ObjectID{11, 14}) {
		t.Fatalf("outcome %v evicted %v, want [11 14]", got, a.Evicted())
	}
}

func TestOldestEvictableDoesNotAllocate(t *testing.T) {
	a := newTestAllocator(t, 64)
	for id := range ObjectID(40) {
		mustReserve(t, a, id, 1, uint64(40-id)%7)
		if err := a.MarkObjectCommitted(id); err != nil {
			t.Fatal(err)
		}
	}
	into := make([]ObjectID, 0, 64)
	if allocs := testing.AllocsPerRun(100, func() { into = a.OldestEvictable(math.MaxInt, into) }); allocs != 0 ||
		len(into) != 40 {
		t.Fatalf("%v allocations per call listing %d objects, want 0 and 40", allocs, len(into))
	}
}

// FuzzOldestEvictableAgainstModel runs with expensive checks on, as FuzzAllocatorAgainstModel does.
func FuzzOldestEvictableAgainstModel(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(
		[]byte("reserve commit release touch evict protect unprotect abort reset reserve reserve"),
	)
	f.Fuzz(func(t *testing.T, data []byte) {
		withExpensiveChecks(t)
		src := &bytesSource{data: data}
		runOldestEvictableAgainstModel(t, fuzzGeometry(src), src, 1<<12, len(data))
	})
}
