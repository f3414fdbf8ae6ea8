package cache

import (
	"fmt"
	"slices"
)

// devicePool hands out this rank's device KV pages (L1). Every rank of a CP group makes the same
// calls, so the pages' indexes agree too, although nothing depends on that: the device buffer is
// private to each rank.
//
// A page is pinned while a copy reads or writes it; a pinned page's node cannot be evicted from L1.
type devicePool struct {
	free []int32 // a stack: the lowest page index is handed out first after a reset
	pins []int32 // per page
}

func newDevicePool(pages int) *devicePool {
	d := &devicePool{free: make([]int32, 0, pages), pins: make([]int32, pages)}
	d.reset()
	return d
}

func (d *devicePool) reset() {
	d.free = d.free[:0]
	for p := int32(len(d.pins)) - 1; p >= 0; p-- {
		d.free = append(d.free, p)
	}
	clear(d.pins)
}

func (d *devicePool) capacity() int  { return len(d.pins) }
func (d *devicePool) available() int { return len(d.free) }

// take pops n pages, or returns nil when fewer are free. It hands them out in ascending order: a
// node's pages are given back in its order, and popped one by one they came back descending, so
// that after the first evictions no node had two consecutive device pages in a row, and every fill,
// copy and load-back check handled its parts one by one, each a cache miss (an L2-only replay at 8
// ranks: 27% of its wall time).
func (d *devicePool) take(n int) []int32 {
	if n > len(d.free) {
		return nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = d.free[len(d.free)-1]
		d.free = d.free[:len(d.free)-1]
		if d.pins[out[i]] != 0 {
			panic(d.broken(out[i], "free page %d handed out with %d pins", out[i], d.pins[out[i]]))
		}
	}
	slices.Sort(out)
	return out
}

// give returns pages to the pool; they must be unpinned, and the pool never holds more than its
// capacity.
func (d *devicePool) give(pages []int32) {
	for _, p := range pages {
		if d.pins[p] != 0 {
			panic(d.broken(p, "freeing page %d with %d pins", p, d.pins[p]))
		}
		d.free = append(d.free, p)
	}
	if len(d.free) > len(d.pins) {
		panic(
			d.broken(
				pages[0],
				"%d pages free of %d after giving back %v: a page given back twice",
				len(d.free),
				len(d.pins),
				pages,
			),
		)
	}
}

// taken lists the pages not free, ascending (the simulator's served-prefix model, through L2View).
func (d *devicePool) taken() []int32 {
	free := make([]bool, len(d.pins))
	for _, p := range d.free {
		free[p] = true
	}
	var out []int32
	for p, f := range free {
		if !f {
			out = append(out, int32(p))
		}
	}
	return out
}

func (d *devicePool) pin(pages []int32) {
	for _, p := range pages {
		d.pins[p]++
	}
}

func (d *devicePool) unpin(pages []int32) {
	for _, p := range pages {
		if d.pins[p] == 0 {
			panic(d.broken(p, "unpinning page %d that is not pinned", p))
		}
		d.pins[p]--
	}
}

func (d *devicePool) anyPinned(pages []int32) bool {
	for _, p := range pages {
		if d.pins[p] != 0 {
			return true
		}
	}
	return false
}

// broken is a broken invariant of the pool, with a dump around page p: the counts, p's pins, the
// free stack's top.
func (d *devicePool) broken(p int32, format string, args ...any) string {
	top := d.free[max(len(d.free)-8, 0):]
	return fmt.Sprintf("cache: broken invariant: "+format, args...) +
		fmt.Sprintf(
			"\ndevice pool: %d of %d pages free, page %d has %d pins, free stack top %v\n",
			len(d.free),
			len(d.pins),
			p,
			d.pins[p],
			top,
		)
}
