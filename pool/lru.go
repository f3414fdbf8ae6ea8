package pool

import (
	"fmt"
	"strings"
)

// lruHeap is a binary min-heap of the evictable records (committed and unreferenced), keyed by
// (clock, id): the least recently used object comes first and equal clocks fall back to the lower
// id, a total order, so every rank evicts the same objects in the same order. All operations are
// O(log objects); the backing array is allocated at start-up with room for every record.
type lruHeap struct {
	items []uint32 // record indices; items[i] key <= items[2i+1] and items[2i+2] keys
}

func lruLess(records []object, a, b uint32) bool {
	ra, rb := &records[a], &records[b]
	if ra.clock != rb.clock {
		return ra.clock < rb.clock
	}
	return ra.id < rb.id
}

// push adds record `index`, which must not be in the heap. It asserts that the record has no heap
// position and that room is left (the array never grows), and after placing it that its back link
// names its position and the heap order holds between it, its parent and its children.
func (h *lruHeap) push(records []object, index uint32) {
	if i := int(records[index].lruIndex) - 1; i >= 0 {
		panic(h.broken(records, i, "lru push: record %d already has heap position %d", index, i))
	}
	if len(h.items) == cap(h.items) {
		panic(
			h.broken(
				records,
				len(h.items)-1,
				"lru push of record %d: the heap is full (%d records)",
				index,
				cap(h.items),
			),
		)
	}
	h.items = append(h.items, index) // never grows: capacity is the record count
	records[index].lruIndex = uint32(len(h.items))
	h.up(records, len(h.items)-1)
	// Most pushes (the newest clock) stay at the end, a leaf whose order with its parent up has
	// just checked: then the back link settles it inline, and assertAround (which throws naming
	// what broke) runs only for a node that moved.
	if i := int(records[index].lruIndex) - 1; i != len(h.items)-1 || h.items[i] != index {
		h.assertAround(records, "lru push", index, i)
	}
}

// remove takes record `index` out of the heap; it must be in it. It asserts that the record's back
// link names a heap position that holds it, and after the removal that the heap order holds around
// the position it emptied.
func (h *lruHeap) remove(records []object, index uint32) {
	i := int(records[index].lruIndex) - 1
	if i < 0 || i >= len(h.items) || h.items[i] != index {
		panic(
			h.broken(
				records,
				i,
				"lru remove: record %d has heap position %d, which does not hold it (heap holds %d)",
				index,
				i,
				len(h.items),
			),
		)
	}
	last := len(h.items) - 1
	if i != last {
		h.swap(records, i, last)
	}
	h.items = h.items[:last]
	records[index].lruIndex = 0
	if i != last {
		h.down(records, i)
		h.up(records, i)
		h.assertAround(records, "lru remove", h.items[i], i)
	}
}

// assertAround checks that position i holds record `index` with its back link, and the heap order
// between it, its parent and its children. up and down have just compared most of these records, so
// the check costs at most one more record read (a sibling of the node's old position).
func (h *lruHeap) assertAround(records []object, op string, index uint32, i int) {
	if i < 0 || i >= len(h.items) || h.items[i] != index || int(records[index].lruIndex) != i+1 {
		panic(
			h.broken(
				records,
				i,
				"%s: record %d has heap position %d, which does not hold it",
				op,
				index,
				i,
			),
		)
	}
	if i > 0 && lruLess(records, index, h.items[(i-1)/2]) {
		panic(
			h.broken(
				records,
				i,
				"%s: heap order broken: position %d orders before its parent",
				op,
				i,
			),
		)
	}
	for _, child := range [2]int{2*i + 1, 2*i + 2} {
		if child < len(h.items) && lruLess(records, h.items[child], index) {
			panic(
				h.broken(
					records,
					i,
					"%s: heap order broken: child %d orders before position %d",
					op,
					child,
					i,
				),
			)
		}
	}
}

// broken is brokenInvariant with the heap around position i: the node, its parent and its children.
func (h *lruHeap) broken(records []object, i int, format string, args ...any) string {
	return brokenInvariant(h.dump(records, i), format, args...)
}

// dump describes the heap's size and the nodes around position i, each with its record's key and
// back link.
func (h *lruHeap) dump(records []object, i int) string {
	var out strings.Builder
	fmt.Fprintf(&out, "lru heap: items=%d capacity=%d\n", len(h.items), cap(h.items))
	for n, p := range [4]int{(i - 1) / 2, i, 2*i + 1, 2*i + 2} {
		if (n == 0 && i <= 0) || p < 0 || p >= len(h.items) { // the root has no parent
			continue
		}
		r := &records[h.items[p]]
		fmt.Fprintf(
			&out,
			"lru position %d: record %d (object %d, clock %d, back link %d)\n",
			p,
			h.items[p],
			r.id,
			r.clock,
			r.lruIndex,
		)
	}
	return out.String()
}

// fix restores the heap order after the key of record `index` changed.
func (h *lruHeap) fix(records []object, index uint32) {
	i := int(records[index].lruIndex) - 1
	h.down(records, i)
	h.up(records, i)
}

func (h *lruHeap) swap(records []object, i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	records[h.items[i]].lruIndex = uint32(i + 1)
	records[h.items[j]].lruIndex = uint32(j + 1)
}

func (h *lruHeap) up(records []object, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !lruLess(records, h.items[i], h.items[parent]) {
			return
		}
		h.swap(records, i, parent)
		i = parent
	}
}

func (h *lruHeap) down(records []object, i int) {
	for {
		least := i
		for _, child := range [2]int{2*i + 1, 2*i + 2} {
			if child < len(h.items) && lruLess(records, h.items[child], h.items[least]) {
				least = child
			}
		}
		if least == i {
			return
		}
		h.swap(records, i, least)
		i = least
	}
}

// lruWalk visits the heap's records in (clock, id) order, the order in which popping the root again
// and again would take them, without changing the heap or the records: a best-first walk from the
// root. The walk is its frontier, a min-heap of heap positions, keyed by the records they hold,
// whose parents have been visited. A record's ancestors all order before it, so the least record
// not yet visited is always on the frontier; each visit takes one position off and puts at most its
// two children on, so after k visits the frontier holds at most k+1 positions and k visits cost O(k
// log k), reading nothing else of the heap.
//
// The walk is a slice passed by value, which next returns updated, so that a caller's scratch array
// can stay on its stack (escape analysis moves it to the heap once a pointer to the slice stores an
// append).
type lruWalk []uint32

// newLRUWalk starts a walk of h in scratch, whose contents are overwritten; it grows beyond
// cap(scratch) as needed.
func newLRUWalk(h *lruHeap, scratch []uint32) lruWalk {
	w := lruWalk(scratch[:0])
	if len(h.items) > 0 {
		w = append(w, 0)
	}
	return w
}

// next returns the walk after one visit, and the least record not yet visited, or false when every
// record has been. h and records must not change during the walk.
func (w lruWalk) next(h *lruHeap, records []object) (lruWalk, uint32, bool) {
	if len(w) == 0 {
		return w, 0, false
	}
	pos := int(w[0])
	// The first child replaces the visited position at the frontier's root (or the frontier's last
	// entry does, when it has no children), and the second child joins at the end.
	child := 2*pos + 1
	if child < len(h.items) {
		w[0] = uint32(child)
	} else {
		w[0] = w[len(w)-1]
		w = w[:len(w)-1]
	}
	w.down(h.items, records, 0)
	if child+1 < len(h.items) {
		w = append(w, uint32(child+1))
		w.up(h.items, records, len(w)-1)
	}
	return w, h.items[pos], true
}

func (w lruWalk) up(items []uint32, records []object, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !lruLess(records, items[w[i]], items[w[parent]]) {
			return
		}
		w[i], w[parent] = w[parent], w[i]
		i = parent
	}
}

func (w lruWalk) down(items []uint32, records []object, i int) {
	for {
		least := i
		for _, child := range [2]int{2*i + 1, 2*i + 2} {
			if child < len(w) && lruLess(records, items[w[child]], items[w[least]]) {
				least = child
			}
		}
		if least == i {
			return
		}
		w[i], w[least] = w[least], w[i]
		i = least
	}
}
