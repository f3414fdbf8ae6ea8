package pool

import (
	"fmt"
	"slices"
	"testing"
)

var replayGeometry = Geometry{
	CPSize:           8,
	Layers:           2,
	PayloadsPerLayer: 2,
	PageTokens:       1,
	TokenBytes:       1,
	Slots:            300,
	SlabBytesMax:     32 * 70,
}

// placements lists every live object's placement hash, by id, for cross-allocator comparison.
func placements(a *Allocator, ids int) []uint64 {
	out := make([]uint64, ids)
	for id := range ids {
		out[id] = a.PlacementHash(ObjectID(id))
	}
	return out
}

// replay feeds the same operation stream to every allocator. When perturb >= 0 the last allocator
// sees the first touch of a live object at or after event `perturb` altered, and the stream has no
// resets, because a reset restores the fresh digest and so, by design, forgets any earlier
// divergence.
func replay(
	allocators []*Allocator,
	operations int,
	perturb int,
	alter func(*Allocator, operation),
) {
	src := &splitmixSource{state: 42}
	for event := range operations {
		op := randomOperation(src, replayGeometry, uint64(event), 64)
		if perturb >= 0 && op.kind == opReset {
			op.kind = opTouch
		}
		last, receivers := allocators[len(allocators)-1], allocators
		if _, live := last.Lookup(op.id); perturb >= 0 && event >= perturb && op.kind == opTouch &&
			live {
			alter(last, op)
			receivers, perturb = allocators[:len(allocators)-1], -2 // this event only
		}
		for _, a := range receivers {
			applyReal(a, op)
		}
	}
}

func newAllocators(t *testing.T, n int) []*Allocator {
	out := make([]*Allocator, n)
	for i := range out {
		a, err := New(replayGeometry)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = a
	}
	return out
}

func TestReplayEightRanksAgree(t *testing.T) {
	ranks := newAllocators(t, 8)
	replay(ranks, 200_000, -1, nil)
	for i, a := range ranks {
		if a.Digest() != ranks[0].Digest() ||
			!slices.Equal(placements(a, 64), placements(ranks[0], 64)) {
			t.Fatalf(
				"rank %d digest %#x, rank 0 %#x (or placements differ)",
				i,
				a.Digest(),
				ranks[0].Digest(),
			)
		}
	}
	if ranks[0].Digest() == ranks[0].FreshDigest() || ranks[0].Objects() == 0 {
		t.Fatalf("the stream left the allocator fresh: the comparison proves nothing")
	}
}

func TestReplayOnePerturbedOperationChangesTheDigest(t *testing.T) {
	alterations := map[string]func(*Allocator, operation){
		"Perturb":             func(a *Allocator, op operation) { a.Perturb() },
		"touch another clock": func(a *Allocator, op operation) { op.clock += 1000; applyReal(a, op) },
	}
	for _, name := range []string{"Perturb", "touch another clock"} {
		ranks := newAllocators(t, 8)
		replay(ranks, 20_000, 5000, alterations[name])
		for i := range 7 {
			if ranks[i].Digest() != ranks[0].Digest() {
				t.Fatalf("%s: unperturbed rank %d diverged", name, i)
			}
		}
		if ranks[7].Digest() == ranks[0].Digest() || ranks[7].Objects() == 0 {
			t.Errorf("%s: perturbed rank ends with the same digest %#x", name, ranks[7].Digest())
		}
	}
}

func TestPerturbShowsInPlacement(t *testing.T) {
	ranks := newAllocators(t, 2)
	ranks[1].Perturb()
	for _, a := range ranks {
		if _, err := a.Reserve(1, 3, 0, 0); err != nil {
			t.Fatal(err)
		}
		if err := a.CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	}
	if ranks[0].PlacementHash(1) == ranks[1].PlacementHash(1) {
		t.Fatalf("a perturbed allocator placed object 1 where a sound one did")
	}
}

func TestResetAfterMillionOperationsIsIndistinguishableFromNew(t *testing.T) {
	operations := 1_000_000
	if testing.Short() {
		operations = 50_000
	}
	used, _ := New(replayGeometry)
	src := &splitmixSource{state: 7}
	for event := range operations {
		applyReal(used, randomOperation(src, replayGeometry, uint64(event), 64))
	}
	if used.Objects() == 0 {
		t.Fatalf("the stream ended empty: reset would prove nothing")
	}
	used.Reset()
	fresh, _ := New(replayGeometry)
	if used.Digest() != fresh.Digest() || used.Digest() != used.FreshDigest() {
		t.Fatalf("digest after reset %#x, new %#x", used.Digest(), fresh.Digest())
	}
	if err := used.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	// The same continuation must produce the same results, placements and digests on both.
	src = &splitmixSource{state: 8}
	for event := range 50_000 {
		op := randomOperation(src, replayGeometry, uint64(event), 64)
		got, want := applyReal(used, op), applyReal(fresh, op)
		if got.outcome != want.outcome || !slices.Equal(got.evicted, want.evicted) ||
			fmt.Sprint(got.err) != fmt.Sprint(want.err) {
			t.Fatalf("event %d after reset: %+v, new: %+v", event, got, want)
		}
		if used.Digest() != fresh.Digest() || used.FreeSlots() != fresh.FreeSlots() {
			t.Fatalf("event %d after reset: digest/free differ", event)
		}
	}
	if !slices.Equal(placements(used, 64), placements(fresh, 64)) ||
		!slices.Equal(used.bitmap.levels[0], fresh.bitmap.levels[0]) {
		t.Fatalf("placements or free bitmap differ between reset and new")
	}
}
