package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
)

// Where each request was served from, by the bytes: the simulator marks every slot part a prefetch
// read filled from the L3, until a load-back takes it into L1, its node is recomputed (a Fill
// naming the node's L2 slots: the KV now in L1 is the model's, so the node's next load-back is the
// L2's), or a backup overwrites it. Each rank's L2 and L3 hits of a step must then be exactly the
// pages it loaded back of the L2's bytes and of the L3's: a hit counted as the L3's on the L2's
// bytes (a prefetched node whose later hits still count as the L3's), one counted as the L2's on
// the L3's bytes (a prefetched node's first hit), or a hit without its load-back, is a decision
// every rank agrees and no byte contradicts. A mark names the prefetch that set it, and a Fill
// clears only marks of prefetches its rank has started: a slower rank may still recompute a node of
// the object those slots held before another rank reserved them for the prefetch and read into them
// (its replica evicts it only then).

// fromL3 notes a finished copy or read: a backup's parts hold the L2's bytes, a prefetch read's the
// L3's.
func (g *group) fromL3(p *pending, err error) {
	if g.prefetched == nil {
		g.prefetched = map[partKey]uint64{}
	}
	read, _ := p.work.(*cache.BlockRead)
	for _, k := range p.parts {
		if read != nil && err == nil {
			g.prefetched[k] = read.Prefetch
		} else if p.writes {
			delete(g.prefetched, k)
		}
	}
}

// loadedBack tallies a load-back's pages on this rank by where their bytes came from.
func (r *rank) loadedBack(w *cache.Copy) {
	for _, s := range w.Slots {
		k := partKey{slab: s.Slab, slot: s.Slot, rank: int32(r.cp)}
		if _, ok := r.g.prefetched[k]; ok {
			r.stepLoads.l3++
			delete(r.g.prefetched, k)
		} else {
			r.stepLoads.l2++
		}
	}
}

// recomputed notes a Fill on this rank: its node's L2 slots no longer hold what its next load-back
// counts as the L3's.
func (r *rank) recomputed(f *cache.Fill) {
	for _, s := range f.Slots {
		k := partKey{slab: s.Slab, slot: s.Slot, rank: int32(r.cp)}
		if seq, ok := r.g.prefetched[k]; ok && seq <= r.lastPrefetch {
			delete(r.g.prefetched, k)
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
		r.g.j.violate(
			r,
			fmt.Sprintf(
				"step %d served %d L2 and %d L3 hit tokens, and loaded back %d pages of the L2's bytes and %d of the L3's (%d tokens a page)",
				s.Step,
				l2,
				l3,
				got.l2,
				got.l3,
				pt,
			),
		)
	}
}

// pageTally is a rank's load-back pages of a step, by where their bytes came from.
type pageTally struct{ l2, l3 int64 }
