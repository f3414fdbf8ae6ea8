package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
)

// Where each request was served from, by the bytes: the simulator marks every slot part a prefetch read filled
// from the L3, until a load-back takes it into L1 (the first hit on a prefetched block is the L3's; later ones,
// from the same L2 object, the L2's) or a backup overwrites it. The pages each rank loads back in a step, by the
// mark of their slots, must then be the L2 and L3 hits its requests were counted: a hit counted in the wrong
// tier, or counted without its load-back, is a decision every rank agrees and no byte contradicts.

// fromL3 notes a finished copy or read: a backup's parts hold the L2's bytes, a prefetch read's the L3's.
func (g *group) fromL3(p *pending, err error) {
	if g.prefetched == nil {
		g.prefetched = map[partKey]bool{}
	}
	_, read := p.work.(*cache.BlockRead)
	for _, k := range p.parts {
		if read && err == nil {
			g.prefetched[k] = true
		} else if p.writes {
			delete(g.prefetched, k)
		}
	}
}

// loadedBack tallies a load-back's pages on this rank by where their bytes came from.
func (r *rank) loadedBack(w *cache.Copy) {
	for _, s := range w.Slots {
		k := partKey{slab: s.Slab, slot: s.Slot, rank: int32(r.cp)}
		if r.g.prefetched[k] {
			r.stepLoads.l3++
			delete(r.g.prefetched, k)
		} else {
			r.stepLoads.l2++
		}
	}
}

// servedFrom checks a step's hits by tier against the pages loaded back in it.
func (r *rank) servedFrom(s *cache.ServedStep) {
	var l2, l3 int64
	for _, q := range s.Requests {
		l2, l3 = l2+q.L2Hit, l3+q.L3Hit
	}
	pt := int64(r.g.j.cfg.Geometry.PageTokens)
	got := r.stepLoads
	r.stepLoads = pageTally{}
	if l2 != got.l2*pt || l3 != got.l3*pt {
		r.g.j.violate(r, fmt.Sprintf("step %d served %d L2 and %d L3 hit tokens, and loaded back %d pages of the L2's bytes and %d of the L3's (%d tokens a page)",
			s.Step, l2, l3, got.l2, got.l3, pt))
	}
}

// pageTally is a rank's load-back pages of a step, by where their bytes came from.
type pageTally struct{ l2, l3 int64 }
