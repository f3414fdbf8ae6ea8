package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The write_back model: a block goes to the L3 when the L2 is about to evict an object holding it, never before
// (DESIGN.md, "The L3 tier"). At every consensus the core shows the simulator its L2 (cache.L2View: the
// allocator's free slots and eviction order, which no Env call shows); when the free slots are below the
// watermark (an eighth of the L2, at least a block), the shortest prefix of the eviction order holding that many
// pages is about to go. Both directions are checked: a write_back block write may start only right after such a
// pass, and must touch a slot of one of those objects (a write at commit, as write_through does, or of an object
// not about to go, is early: the L3's I/O spent on KV the L2 still serves); and every block whole inside an
// audited object of such a prefix must be written by the end of its group's run (a pass that forgot some objects
// loses their blocks when the L2 evicts them: no byte goes wrong, so nothing else sees it). It trusts the
// allocator's order (the pool's own tests hold that). What it does not require, because no sound requirement
// follows from what the Env sees: a block spanning two objects, which the core writes only when every node of the
// tree's path through it points into a committed object (an audit names an object's tokens and position, not the
// path before them: two paths may hold the same tokens at one place, and a hollow node on the path may have its
// tokens held by another path's object, so the simulator cannot tell the block is whole); and a prefetched object,
// never audited, whose blocks are written only over the nodes its attach pointed at it (from the prefix the tree
// served then to the first node already holding KV: the tree's) and whose object id no Env call names.

// auditedObject is what a committed backup's audit says its L2 object holds.
type auditedObject struct {
	startPos int
	tokens   []int32
}

// nearEviction is the core's view of the L2 at a consensus on rank r: the slots r may write back until its next
// consensus, and the blocks that must be written by the end.
func (r *rank) nearEviction(v cache.L2View) {
	cfg := &r.g.j.cfg
	if !cfg.L3.Enabled || cfg.L3.WritePolicy != cache.L3WriteBack {
		return
	}
	geo := cfg.Geometry
	watermark := max(geo.Slots/8, cfg.L3.BlockTokens/geo.PageTokens)
	clear(r.evictingSlots)
	if v.FreeSlots() >= watermark {
		return
	}
	for _, obj := range v.OldestEvictable(watermark) {
		for _, s := range v.Slots(obj) {
			r.evictingSlots[s] = true
		}
		if a, ok := r.g.auditedObjects[obj]; ok {
			r.g.mustWriteWhole(a.startPos, a.tokens)
		}
	}
}

// writesBack checks a write_back block write against the last pass: one of its pages is in an object about to go.
func (r *rank) writesBack(w *cache.BlockWrite) {
	if !r.g.j.cfg.L3.Enabled || r.g.j.cfg.L3.WritePolicy != cache.L3WriteBack {
		return
	}
	for _, s := range w.Pages {
		if r.evictingSlots[s] {
			r.g.j.models.WriteBacks++
			return
		}
	}
	r.g.j.violate(r, fmt.Sprintf("write_back: block write %d (tokens %d..%d) started while none of its L2 objects is about to be evicted (%d slots near eviction at the last consensus)",
		w.Seq, w.StartPos, w.StartPos+len(w.Tokens)-1, len(r.evictingSlots)))
}

// auditedWriteBack notes what a committed object holds, for a later near-eviction pass.
func (g *group) auditedWriteBack(a *cache.Audit) {
	if !g.j.cfg.L3.Enabled || g.j.cfg.L3.WritePolicy != cache.L3WriteBack {
		return
	}
	if g.auditedObjects == nil {
		g.auditedObjects = map[uint64]auditedObject{}
	}
	g.auditedObjects[a.Object] = auditedObject{startPos: a.StartPos, tokens: a.Tokens}
}
