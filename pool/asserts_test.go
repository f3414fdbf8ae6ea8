package pool

import (
	"strings"
	"testing"
)

// withExpensiveChecks makes every mutation of the test check the whole state, and restores the
// default when the test ends. Tests that use it must not run in parallel.
func withExpensiveChecks(t testing.TB) {
	expensiveChecks = true
	t.Cleanup(func() { expensiveChecks = false })
}

// mustThrow runs f and checks that it throws: a panic that names the broken invariant and dumps
// state.
func mustThrow(t *testing.T, invariant string, f func()) {
	t.Helper()
	defer func() {
		t.Helper()
		message, _ := recover().(string)
		if !strings.HasPrefix(message, "pool: broken invariant: ") ||
			!strings.Contains(message, invariant) {
			t.Fatalf("panic %q does not name the broken invariant %q", message, invariant)
		}
		if strings.Count(message, "\n") < 2 {
			t.Fatalf("panic %q carries no state dump", message)
		}
	}()
	f()
}

// TestFreeBitmapAssertsFire corrupts bitmaps of three levels and checks that take and give refuse.
func TestFreeBitmapAssertsFire(t *testing.T) {
	const slots = 4200
	cases := []struct {
		name, invariant string
		corrupt         func(b *freeBitmap)
		op              func(b *freeBitmap)
	}{
		{"take a used slot", "take [15, 25): slot 20 is not free",
			func(b *freeBitmap) { b.take(20, 30) }, func(b *freeBitmap) { b.take(15, 25) }},
		{
			"take with a stale summary",
			"take: the level 1 summary bit of free bitmap word 0 disagrees",
			func(b *freeBitmap) { b.levels[1][0] &^= 1 },
			func(b *freeBitmap) { b.take(0, 1) },
		},
		{"give a free slot", "give [5, 12): slot 10 is already free",
			func(b *freeBitmap) { b.take(0, 10) }, func(b *freeBitmap) { b.give(5, 12) }},
		{
			"give with a stale summary",
			"give: the level 1 summary bit of free bitmap word 0 disagrees",
			func(b *freeBitmap) { b.take(0, 2); b.levels[1][0] &^= 1 },
			func(b *freeBitmap) { b.give(0, 1) },
		},
		{"take nothing", "take [5, 5): not a non-empty range",
			func(*freeBitmap) {}, func(b *freeBitmap) { b.take(5, 5) }},
		{"give past the end", "give [4190, 4201): not a non-empty range",
			func(b *freeBitmap) { b.take(4190, slots) }, func(b *freeBitmap) { b.give(4190, slots+1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newFreeBitmap(slots)
			c.corrupt(&b)
			mustThrow(t, c.invariant, func() { c.op(&b) })
		})
	}
}

// bucketOf returns the bucket that holds record `index`.
func bucketOf(t *testing.T, table *objectTable, index uint32) int {
	for i, e := range table.buckets {
		if uint32(e) == index+1 {
			return i
		}
	}
	t.Fatalf("record %d is in no bucket", index)
	return -1
}

// TestObjectTableAssertsFire corrupts small tables and checks that insert and remove refuse.
func TestObjectTableAssertsFire(t *testing.T) {
	cases := []struct {
		name, invariant string
		op              func(t *testing.T, table *objectTable)
	}{
		{
			"insert a present id",
			"insert: object 7 is already in the table",
			func(t *testing.T, table *objectTable) {
				table.insert(7)
				table.insert(7)
			},
		},
		{
			"insert into a live record",
			"insert of object 2: record 0 is not a free record",
			func(t *testing.T, table *objectTable) {
				table.remove(table.insert(1))
				table.records[0].live = true // the free list now leads to a live record
				table.insert(2)
			},
		},
		{
			"insert beyond the records",
			"insert of object 3: 41 live objects in 40 records",
			func(t *testing.T, table *objectTable) {
				table.liveObjects = len(table.records)
				table.insert(3)
			},
		},
		{
			"remove a free record",
			"remove: record 5 (object 0) is not live",
			func(t *testing.T, table *objectTable) {
				table.remove(5)
			},
		},
		{
			"remove a record missing from its chain",
			"remove: object 9 (record 0) is not on the probe chain",
			func(t *testing.T, table *objectTable) {
				index := table.insert(9)
				table.buckets[bucketOf(t, table, index)] = 0
				table.remove(index)
			},
		},
		{
			"remove a bucket with the wrong home",
			"of object 9 records home",
			func(t *testing.T, table *objectTable) {
				index := table.insert(9)
				home := table.home(9)
				table.buckets[home] = uint64(home+1)<<32 | uint64(index+1)
				table.remove(index)
			},
		},
		{
			"remove below zero live objects",
			"remove of object 4: live object count went negative",
			func(t *testing.T, table *objectTable) {
				index := table.insert(4)
				table.liveObjects = 0
				table.remove(index)
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			table := newObjectTable(40)
			mustThrow(t, c.invariant, func() { c.op(t, &table) })
		})
	}
}

// TestLRUHeapAssertsFire corrupts heaps (keys changed behind the heap's back, stale back links) and
// checks that push and remove refuse.
func TestLRUHeapAssertsFire(t *testing.T) {
	cases := []struct {
		name, invariant string
		clocks          []uint64 // record i gets clocks[i] and is pushed in order
		op              func(h *lruHeap, records []object)
	}{
		{"push a record in the heap", "lru push: record 0 already has heap position 0", []uint64{5},
			func(h *lruHeap, records []object) { h.push(records, 0) }},
		{
			"push into a full heap",
			"lru push of record 7: the heap is full",
			[]uint64{1, 2, 3, 4, 5, 6, 7},
			func(h *lruHeap, records []object) { h.items = h.items[:len(h.items):len(h.items)]; h.push(records, 7) },
		},
		{
			"push next to a broken order",
			"lru push: heap order broken: child 1 orders before position 0",
			[]uint64{5, 7},
			func(h *lruHeap, records []object) { records[1].clock = 1; records[2].clock = 3; h.push(records, 2) },
		},
		{
			"remove a record not in the heap",
			"lru remove: record 3 has heap position -1",
			[]uint64{5, 7},
			func(h *lruHeap, records []object) { h.remove(records, 3) },
		},
		{
			"remove with a stale back link",
			"lru remove: record 0 has heap position 1",
			[]uint64{5, 7},
			func(h *lruHeap, records []object) { records[0].lruIndex = 2; h.remove(records, 0) },
		},
		// Keys 5 7 6 10 11 8 9 in heap order; lowering 10 and 11 below their parent 7 breaks the
		// order where remove's sift leaves 5 above 3.
		{
			"remove next to a broken order",
			"lru remove: heap order broken: child 4 orders before position 1",
			[]uint64{5, 7, 6, 10, 11, 8, 9},
			func(h *lruHeap, records []object) { records[3].clock = 1; records[4].clock = 3; h.remove(records, 1) },
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			records := make([]object, 8)
			h := lruHeap{items: make([]uint32, 0, len(records))}
			for i, clock := range c.clocks {
				records[i] = object{id: ObjectID(i), clock: clock, live: true, committed: true}
				h.push(records, uint32(i))
			}
			mustThrow(t, c.invariant, func() { c.op(&h, records) })
		})
	}
}

// TestAllocatorAssertsFire corrupts allocators behind their back and checks that the next mutation
// throws: the cheap asserts always, the whole-state check only with expensive checks on.
func TestAllocatorAssertsFire(t *testing.T) {
	t.Run("empty extent", func(t *testing.T) {
		a := newTestAllocator(t, 8)
		mustReserve(t, a, 1, 3, 1)
		a.extentSlots[0] = 0
		mustThrow(t, "free: object 1 extent at slot 0 is empty", func() { _ = a.Release(1) })
	})
	t.Run("used slot freed behind the back", func(t *testing.T) {
		a := newTestAllocator(t, 8)
		mustReserve(t, a, 1, 3, 1)
		a.bitmap.give(1, 2)
		mustThrow(t, "give [0, 3): slot 1 is already free", func() { _ = a.Release(1) })
	})
	t.Run("slab counter off, expensive checks off", func(t *testing.T) {
		a := newTestAllocator(t, 8)
		mustReserve(t, a, 1, 3, 1)
		a.slabFreeSlots[0]++
		if err := a.Touch(1, 5); err != nil { // the cheap asserts cannot see a counter
			t.Fatal(err)
		}
	})
	t.Run("slab counter off, expensive checks on", func(t *testing.T) {
		withExpensiveChecks(t)
		a := newTestAllocator(t, 8)
		mustReserve(t, a, 1, 3, 1)
		a.slabFreeSlots[0]++
		mustThrow(t, "after touch: slab 0: free counter", func() { _ = a.Touch(1, 5) })
	})
}
