package pool

import "testing"

// TestStateHashResetEqualsFresh drives each model geometry with the model's random operations and,
// every few hundred operations, checks that two allocators fed the same calls hash alike and that a
// busy allocator does not hash like a fresh one; every third round Reset must bring it back to
// exactly the fresh hash.
func TestStateHashResetEqualsFresh(t *testing.T) {
	for i, g := range everyPolicyGeometry() {
		fresh, err := FreshStateHash(g)
		if err != nil {
			t.Fatal(err)
		}
		a, b := mustNew(t, g), mustNew(t, g)
		if a.StateHash() != fresh {
			t.Fatalf("geometry %d: New hashes %016x, FreshStateHash %016x", i, a.StateHash(), fresh)
		}
		src := &splitmixSource{state: uint64(i) + 11}
		for round := range 40 {
			for event := range 300 {
				op := randomOperation(src, g, uint64(round*300+event), 48)
				applyReal(a, op)
				applyReal(b, op)
			}
			if a.StateHash() != b.StateHash() {
				t.Fatalf(
					"geometry %d round %d: equal histories hash %016x and %016x",
					i,
					round,
					a.StateHash(),
					b.StateHash(),
				)
			}
			if a.Objects() > 0 && a.StateHash() == fresh {
				t.Fatalf(
					"geometry %d round %d: %d live objects but the fresh hash",
					i,
					round,
					a.Objects(),
				)
			}
			if round%3 != 2 { // between resets states grow full and fragmented
				continue
			}
			a.Reset()
			b.Reset()
			if got := a.StateHash(); got != fresh {
				t.Fatalf(
					"geometry %d round %d: Reset hashes %016x, fresh %016x",
					i,
					round,
					got,
					fresh,
				)
			}
		}
	}
}

func mustNew(t testing.TB, g Geometry) *Allocator {
	t.Helper()
	a, err := New(g)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// busyAllocator builds an allocator with every kind of state: committed, protected and uncommitted
// objects, an LRU heap of several, freed records on the free list, an eviction list, several
// extents per object.
func busyAllocator(t *testing.T) *Allocator {
	g := modelGeometries[1] // 200 slots in slabs of 70: three slabs, two bitmap levels
	a := mustNew(t, g)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for id := range ObjectID(12) {
		_, err := a.Reserve(id, 5+int(id), uint64(id), uint64(id)/3)
		must(err)
	}
	for id := range ObjectID(8) {
		must(a.MarkObjectCommitted(id))
	}
	must(a.Release(3))
	must(a.Release(9)) // uncommitted
	must(a.Protect(5))
	must(a.Touch(6, 1))
	if outcome, err := a.Reserve(100, 140, 100, 9); err != nil || outcome != ReservedAfterEviction {
		t.Fatalf("reserve with eviction: %v, %v", outcome, err)
	}
	for _, id := range []ObjectID{100, 8, 10} {
		must(a.MarkObjectCommitted(id))
	}
	if len(a.lru.items) < 2 || a.table.freeHead == 0 ||
		int(a.table.highWater) == len(a.table.records) {
		t.Fatalf(
			"busy allocator lacks state: lru %d, free head %d, high water %d",
			len(a.lru.items),
			a.table.freeHead,
			a.table.highWater,
		)
	}
	if err := a.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestStateHashSeesEveryPart changes one part of the state at a time, behind the allocator's back
// (as a buggy Reset or a stray write would), and requires the hash to change.
func TestStateHashSeesEveryPart(t *testing.T) {
	liveRecord := func(a *Allocator) *object {
		index, _ := a.table.find(10)
		return &a.table.records[index]
	}
	mutations := map[string]func(a *Allocator){
		"bitmap level 0 word":  func(a *Allocator) { a.bitmap.levels[0][len(a.bitmap.levels[0])-1] ^= 1 },
		"bitmap summary word":  func(a *Allocator) { a.bitmap.levels[1][0] ^= 1 << 1 },
		"lowest-free bound":    func(a *Allocator) { a.bitmap.lowFreeSlot++ },
		"slab free count":      func(a *Allocator) { a.slabFreeSlots[2]-- },
		"slab leaked count":    func(a *Allocator) { a.slabLeakedSlots[0]++ },
		"record id":            func(a *Allocator) { liveRecord(a).id += 1000 },
		"record seq":           func(a *Allocator) { liveRecord(a).seq++ },
		"record clock":         func(a *Allocator) { liveRecord(a).clock++ },
		"record pages":         func(a *Allocator) { liveRecord(a).pages++ },
		"record first slot":    func(a *Allocator) { liveRecord(a).firstSlot++ },
		"record extents":       func(a *Allocator) { liveRecord(a).extentCount++ },
		"record LRU link":      func(a *Allocator) { liveRecord(a).lruIndex++ },
		"record refs":          func(a *Allocator) { liveRecord(a).refs++ },
		"record committed":     func(a *Allocator) { liveRecord(a).committed = !liveRecord(a).committed },
		"record live":          func(a *Allocator) { liveRecord(a).live = false },
		"free-list link":       func(a *Allocator) { a.table.records[a.table.freeHead-1].firstSlot++ },
		"unused record":        func(a *Allocator) { a.table.records[len(a.table.records)-1].clock = 1 },
		"id bucket":            func(a *Allocator) { a.table.buckets[len(a.table.buckets)-1] ^= 1 << 40 },
		"LRU order":            func(a *Allocator) { a.lru.items[0], a.lru.items[1] = a.lru.items[1], a.lru.items[0] },
		"LRU length":           func(a *Allocator) { a.lru.items = a.lru.items[:len(a.lru.items)-1] },
		"extent length":        func(a *Allocator) { a.extentSlots[len(a.extentSlots)-1] = 1 },
		"extent link":          func(a *Allocator) { a.extentNext[0]++ },
		"eviction list":        func(a *Allocator) { a.evicted = a.evicted[:0] },
		"digest":               func(a *Allocator) { a.digest ^= 1 },
		"free slot count":      func(a *Allocator) { a.freeSlots-- },
		"evictable page count": func(a *Allocator) { a.lruPages++ },
		"table free head":      func(a *Allocator) { a.table.freeHead = 0 },
		"table high water":     func(a *Allocator) { a.table.highWater++ },
		"table live count":     func(a *Allocator) { a.table.liveObjects++ },
	}
	base := busyAllocator(t).StateHash()
	if again := busyAllocator(t).StateHash(); again != base {
		t.Fatalf("the same calls hash %016x and %016x", base, again)
	}
	for name, mutate := range mutations {
		a := busyAllocator(t)
		mutate(a)
		if a.StateHash() == base {
			t.Errorf("%s changed, the state hash did not", name)
		}
	}
}

// TestStateHashCatchesResetThatKeepsSlots installs BreakResetForTest: the digest and the free count
// then look fresh after Reset, which is all the old flush check compared, and only the state hash
// tells.
func TestStateHashCatchesResetThatKeepsSlots(t *testing.T) {
	g := modelGeometries[1]
	fresh, err := FreshStateHash(g)
	if err != nil {
		t.Fatal(err)
	}
	a := busyAllocator(t)
	restore := BreakResetForTest()
	a.Reset()
	restore()
	if a.Digest() != a.FreshDigest() || a.FreeSlots() != g.Slots || a.Objects() != 0 {
		t.Fatalf(
			"the broken Reset should look fresh to the old check: digest %016x (fresh %016x), %d of %d free, %d objects",
			a.Digest(),
			a.FreshDigest(),
			a.FreeSlots(),
			g.Slots,
			a.Objects(),
		)
	}
	if a.StateHash() == fresh {
		t.Fatal("a Reset that kept the slots used hashes like a fresh allocator")
	}
	a.Reset()
	if a.StateHash() != fresh {
		t.Fatalf("after restore, Reset hashes %016x, fresh %016x", a.StateHash(), fresh)
	}
}

// BenchmarkStateHash times the flush check at 2^20 slots, with MaxObjects at its default (one page
// per object, the largest tables) and the pool half full of 16-page objects.
func BenchmarkStateHash(b *testing.B) {
	g := Geometry{
		CPSize:           8,
		Layers:           1,
		PayloadsPerLayer: 1,
		PageTokens:       1,
		TokenBytes:       1,
		Slots:            1 << 20,
		SlabBytesMax:     1 << 30,
	}
	a := mustNew(b, g)
	for id := range ObjectID(g.Slots / 32) {
		if _, err := a.Reserve(id, 16, uint64(id), uint64(id)); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		a.StateHash()
	}
}

// TestMix64IsSplitmix64 pins Mix64 to the published splitmix64 sequence from seed 0: the digest,
// the state hash and hicache's pinned synthetic workload all depend on its exact output.
func TestMix64IsSplitmix64(t *testing.T) {
	want := []uint64{0xe220a8397b1dcdaf, 0x6e789e6aa1b965f4, 0x06c45d188009454f}
	var state uint64
	for i, w := range want {
		state += 0x9e3779b97f4a7c15
		if got := Mix64(state); got != w {
			t.Fatalf("output %d: Mix64 gives %#016x, splitmix64 %#016x", i, got, w)
		}
	}
}
