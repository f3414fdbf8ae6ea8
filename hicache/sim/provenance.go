package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
)

// Where each request was served from, by the bytes: the simulator marks every slot part a prefetch read filled
// from the L3, until a load-back takes it into L1 or a backup overwrites it. Each rank's L2 and L3 hits of a step
// must then be the pages it loaded back, and its L3 hits no more than the pages of the L3's bytes: a hit counted
// as the L3's on the L2's bytes (a prefetched node whose later hits still count as the L3's), or a hit counted
// without its load-back, is a decision every rank agrees and no byte contradicts. The other way is allowed: a
// prefetched node whose KV was recomputed before its first hit (the prefetch served nobody) is the L2's when it
// is next loaded back, though its bytes came from the L3 (the simulator does not see which node a fill is).

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
	if l2+l3 != (got.l2+got.l3)*pt || l3 > got.l3*pt {
		r.g.j.violate(r, fmt.Sprintf("step %d served %d L2 and %d L3 hit tokens, and loaded back %d pages of the L2's bytes and %d of the L3's (%d tokens a page)",
			s.Step, l2, l3, got.l2, got.l3, pt))
	}
}

// pageTally is a rank's load-back pages of a step, by where their bytes came from.
type pageTally struct{ l2, l3 int64 }
