package pool

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func newTestAllocator(t *testing.T, slots int) *Allocator {
	t.Helper()
	a, err := New(
		Geometry{
			CPSize:           2,
			Layers:           1,
			PayloadsPerLayer: 2,
			PageTokens:       1,
			TokenBytes:       1,
			Slots:            slots,
			SlabBytesMax:     4 * 4,
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func mustReserve(t *testing.T, a *Allocator, id ObjectID, pages int, clock uint64) Outcome {
	t.Helper()
	outcome, err := a.Reserve(id, pages, clock, clock)
	if err != nil {
		t.Fatal(err)
	}
	return outcome
}

func TestEvictionFollowsClockThenIDAndSparesUncommittedAndProtected(t *testing.T) {
	a := newTestAllocator(t, 6)
	// ids 10..15 with clocks chosen so that (clock, id) order is 12, 11, 14, 13, 10, 15.
	clocks := map[ObjectID]uint64{10: 9, 11: 3, 12: 3, 13: 7, 14: 5, 15: 9}
	for id := ObjectID(10); id <= 15; id++ {
		mustReserve(t, a, id, 1, clocks[id])
		if id != 14 {
			if err := a.MarkObjectCommitted(id); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Protect(13); err != nil {
		t.Fatal(err)
	}
	// 14 is uncommitted and 13 protected: the order skips them.
	if got := mustReserve(t, a, 20, 4, 50); got != ReservedAfterEviction ||
		!slices.Equal(a.Evicted(), []ObjectID{11, 12, 10, 15}) {
		t.Fatalf("outcome %v evicted %v, want [11 12 10 15]", got, a.Evicted())
	}
	// Only 13 and 14 are left besides 20, neither evictable: a further request misses and evicts
	// nothing. It empties the eviction list, which chains the miss into the digest.
	digest := a.Digest()
	if got := mustReserve(t, a, 21, 1, 51); got != Miss || len(a.Evicted()) != 0 ||
		a.Digest() == digest {
		t.Fatalf("outcome %v evicted %v digest changed %v", got, a.Evicted(), a.Digest() != digest)
	}
	for _, id := range []ObjectID{13, 14, 20} {
		if _, ok := a.Lookup(id); !ok {
			t.Fatalf("object %d was evicted", id)
		}
	}
}

func TestRollbackIsIdempotent(t *testing.T) {
	a := newTestAllocator(t, 8)
	mustReserve(t, a, 1, 3, 1)
	mustReserve(t, a, 2, 2, 2)
	if err := a.Abort(1); err != nil {
		t.Fatal(err)
	}
	digest, free := a.Digest(), a.FreeSlots()
	for range 3 {
		if err := a.Abort(1); err != nil || a.Digest() != digest || a.FreeSlots() != free {
			t.Fatalf("repeated abort: err %v, digest or free slots changed", err)
		}
	}
	if free != 6 {
		t.Fatalf("free %d after aborting a 3-page object, want 6", free)
	}
	if err := a.MarkObjectCommitted(2); err != nil {
		t.Fatal(err)
	}
	if err := a.Abort(2); !errors.Is(err, ErrCommitted) {
		t.Fatalf("abort of a committed object: %v, want ErrCommitted", err)
	}
}

func TestMisuseChangesNothing(t *testing.T) {
	a := newTestAllocator(t, 8)
	mustReserve(t, a, 1, 3, 1)
	digest := a.Digest()
	checks := []struct {
		name string
		err  error
		want error
	}{
		{"release unknown", a.Release(9), ErrUnknownObject},
		{"touch unknown", a.Touch(9, 3), ErrUnknownObject},
		{"commit unknown", a.MarkObjectCommitted(9), ErrUnknownObject},
		{"unprotect unreferenced", a.Unprotect(1), ErrNotProtected},
		{"evict uncommitted", a.Evict(1), ErrNotCommitted},
	}
	for _, c := range checks {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if a.Digest() != digest {
		t.Fatalf("misuse changed the digest")
	}
	if err := a.Protect(1); err != nil {
		t.Fatal(err)
	}
	if err := a.Release(1); !errors.Is(err, ErrProtected) {
		t.Fatalf("release of a protected object: %v, want ErrProtected", err)
	}
}

func TestBrokenInvariantPanicsWithDump(t *testing.T) {
	a := newTestAllocator(t, 8)
	mustReserve(t, a, 1, 3, 1)
	a.bitmap.give(0, 1) // corrupt: a used slot marked free behind the allocator's back
	if err := a.CheckInvariants(); err == nil {
		t.Fatalf("CheckInvariants missed a used slot marked free")
	}
	defer func() {
		message, _ := recover().(string)
		if !strings.Contains(message, "broken invariant") ||
			!strings.Contains(message, "free bitmap word 0") {
			t.Fatalf("panic %q lacks the invariant or the state dump", message)
		}
	}()
	_ = a.Release(1)
	t.Fatalf("Release of a corrupted object did not panic")
}
