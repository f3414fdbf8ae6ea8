package pool

// lruHeap is a binary min-heap of the evictable records (committed and unreferenced), keyed by
// (clock, id): the least recently used object comes first and equal clocks fall back to the lower id,
// a total order, so every rank evicts the same objects in the same order. All operations are
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

func (h *lruHeap) push(records []object, index uint32) {
	h.items = append(h.items, index) // never grows: capacity is the record count
	records[index].lruIndex = uint32(len(h.items))
	h.up(records, len(h.items)-1)
}

// remove takes record `index` out of the heap; it must be in it.
func (h *lruHeap) remove(records []object, index uint32) {
	i := int(records[index].lruIndex) - 1
	last := len(h.items) - 1
	if i != last {
		h.swap(records, i, last)
	}
	h.items = h.items[:last]
	records[index].lruIndex = 0
	if i != last {
		h.down(records, i)
		h.up(records, i)
	}
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
