package pool

import (
	"slices"
	"testing"
)

// policyAllocator is a pool of `slots` one-page slots under policy p.
func policyAllocator(t *testing.T, slots int, p Policy) *Allocator {
	t.Helper()
	return mustNew(t, Geometry{
		CPSize:           1,
		Layers:           1,
		PayloadsPerLayer: 1,
		PageTokens:       1,
		TokenBytes:       1,
		Slots:            slots,
		SlabBytesMax:     1 << 20,
		Policy:           p,
	})
}

// committedObjects reserves and commits objects of one page each, object id at clock id.
func committedObjects(t *testing.T, a *Allocator, ids ...ObjectID) {
	t.Helper()
	for _, id := range ids {
		mustReserve(t, a, id, 1, uint64(id))
		if err := a.MarkObjectCommitted(id); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSLRUEvictsProbationFirstAndDemotesByClock, by hand on ten slots (protected holds at most
// eight pages): a touched object is protected from objects seen once even when they are older
// than it is newer; a ninth protected page demotes protected's least recently used object, which
// keeps its clock in probation.
func TestSLRUEvictsProbationFirstAndDemotesByClock(t *testing.T) {
	a := policyAllocator(t, 10, PolicySLRU)
	committedObjects(t, a, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
	if err := a.Touch(1, 11); err != nil { // 1 is protected now, the most recent
		t.Fatal(err)
	}
	want := []ObjectID{2, 3, 4, 5, 6, 7, 8, 9, 10, 1}
	if got := a.OldestEvictable(100, nil); !slices.Equal(got, want) {
		t.Fatalf("eviction order %v, want probation 2..10 before protected 1", got)
	}
	// Promote 2..9 as well (clocks 12..19): nine protected pages, one over the bound; the least
	// recently used protected object, 1 (clock 11), goes back to probation with its clock.
	for id := ObjectID(2); id <= 9; id++ {
		if err := a.Touch(id, uint64(id)+10); err != nil {
			t.Fatal(err)
		}
	}
	if info, _ := a.Lookup(1); info.Protected || info.Clock != 11 {
		t.Fatalf("object 1: %+v, want demoted with clock 11", info)
	}
	want = []ObjectID{10, 1, 2, 3, 4, 5, 6, 7, 8, 9} // probation (10 at clock 10, 1 at 11)
	if got := a.OldestEvictable(100, nil); !slices.Equal(got, want) {
		t.Fatalf("eviction order %v, want %v", got, want)
	}
	if outcome := mustReserve(t, a, 20, 2, 30); outcome != ReservedAfterEviction ||
		!slices.Equal(a.Evicted(), []ObjectID{10, 1}) {
		t.Fatalf("reserve: %v evicted %v, want probation's 10 and 1", outcome, a.Evicted())
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// TestAdmitSeenRefusesFirstSightingsOnlyUnderPressure, by hand on four slots: while the object fits
// in the free slots it is admitted unseen; once it would have to evict, only content seen before
// comes in (and evicts by LRU), the rest is refused with nothing evicted; Reserve itself (the
// prefetch's call) is never refused, and under LRU the key is not used.
func TestAdmitSeenRefusesFirstSightingsOnlyUnderPressure(t *testing.T) {
	a := policyAllocator(t, 4, PolicyAdmitSeen)
	for id := ObjectID(1); id <= 4; id++ {
		if outcome, err := a.ReserveAdmitted(id, 1, uint64(id), uint64(id), 100+uint64(id)); err != nil ||
			outcome != Reserved {
			t.Fatalf("object %d: %v %v, want reserved (it fits)", id, outcome, err)
		}
		if err := a.MarkObjectCommitted(id); err != nil {
			t.Fatal(err)
		}
	}
	digest := a.Digest()
	if outcome, _ := a.ReserveAdmitted(5, 1, 5, 5, 200); outcome != Refused || len(a.Evicted()) != 0 {
		t.Fatalf("an unseen key under pressure: %v evicted %v, want refused", outcome, a.Evicted())
	}
	if a.Digest() == digest || a.Objects() != 4 {
		t.Fatalf("a refusal must chain its sighting and place nothing (%d objects)", a.Objects())
	}
	if outcome, _ := a.ReserveAdmitted(6, 1, 6, 6, 200); outcome != ReservedAfterEviction ||
		!slices.Equal(a.Evicted(), []ObjectID{1}) {
		t.Fatalf("the key seen again: %v evicted %v, want admitted evicting 1", outcome, a.Evicted())
	}
	if outcome := mustReserve(t, a, 7, 1, 7); outcome != ReservedAfterEviction {
		t.Fatalf("Reserve under admit_seen: %v, want admitted (the prefetch's call)", outcome)
	}
	lru := policyAllocator(t, 1, PolicyLRU)
	committedObjects(t, lru, 1)
	if outcome, _ := lru.ReserveAdmitted(2, 1, 2, 2, 7); outcome != ReservedAfterEviction {
		t.Fatalf("ReserveAdmitted under LRU: %v, want Reserve's outcome", outcome)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

func TestParsePolicy(t *testing.T) {
	for _, name := range PolicyNames() {
		if p, err := ParsePolicy(name); err != nil || p.String() != name {
			t.Errorf("%q parses to %v (%v)", name, p, err)
		}
	}
	if _, err := ParsePolicy("arc"); err == nil {
		t.Error("an unknown policy parses")
	}
	if PolicyNames()[0] != "lru" || Policy(0) != PolicyLRU {
		t.Error("LRU must be the default, the zero value and the first name")
	}
}
