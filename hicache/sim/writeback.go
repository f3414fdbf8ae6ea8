package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The write_back model: a block goes to the L3 when the L2 is about to evict an object holding it,
// never before (DESIGN.md, "The L3 tier"). At every consensus the core shows the simulator its L2
// (cache.L2View: the allocator's free slots and eviction order, which no Env call shows); when the
// free slots are below the watermark (an eighth of the L2, at least a block), the shortest prefix
// of the eviction order holding that many pages is about to go. Both directions are checked: a
// write_back block write may start only right after such a pass, and must touch a slot of one of
// those objects (a write at commit, as write_through does, or of an object not about to go, is
// early: the L3's I/O spent on KV the L2 still serves); and every block whole inside an audited
// object of such a prefix must be written by the end of its group's run (a pass that forgot some
// objects loses their blocks when the L2 evicts them: no byte goes wrong, so nothing else sees it).
// And at the first pass that finds a backup about to go, every block through its pages whose every
// page is in a committed backup must be written too, over any objects (mustWriteThrough: the
// served-prefix model, served.go, names each backup's pages by path, and a live backup's tree node
// points into it, so the tree's path through such a block is in committed L2, which is what the
// pass writes; write_back_one_object, a pass that skips blocks spanning two objects, is caught so).
// It trusts the allocator's order (the pool's own tests hold that). What it does not require:
// blocks with a page in a prefetched object, never audited and unnamed (no Env call names a
// prefetch's object), whose blocks the pass writes only over the nodes its attach pointed at it
// (from the prefix the tree served then to the first node already holding KV: the tree's).

// auditedObject is what a committed backup's audit says its L2 object holds.
type auditedObject struct {
	startPos int
	tokens   []int32
}

// nearEviction is the core's view of the L2 at a consensus on rank r: the slots r may write back
// until its next consensus, and the blocks that must be written by the end.
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
	// CP rank 0's, built at the first object the pass sees for the first time
	var inL2 *committedPages
	for _, obj := range v.OldestEvictable(watermark) {
		for _, s := range v.Slots(obj) {
			r.evictingSlots[s] = true
		}
		if a, ok := r.g.auditedObjects[obj]; ok {
			r.g.mustWriteWhole(a.startPos, a.tokens)
		}
		if r.cp == 0 && !r.g.passed[obj] {
			if inL2 == nil {
				inL2 = r.g.committedPages(
					func(obj uint64) bool { _, committed := v.Object(obj); return committed },
				)
			}
			r.g.mustWriteThrough(obj, inL2)
		}
	}
}

// committedPages are the named pages of the live committed backups (served.go), and each one's next
// pages on their paths among them.
type committedPages struct {
	in       map[uint64]bool
	children map[uint64][]uint64
}

func (g *group) committedPages(committed func(obj uint64) bool) *committedPages {
	h := &g.held
	h.init()
	c := &committedPages{in: map[uint64]bool{}, children: map[uint64][]uint64{}}
	for obj, slots := range h.backups {
		if committed(obj) {
			for _, s := range slots {
				if id, ok := h.slots[s]; ok && !c.in[id] {
					c.in[id] = true
					c.children[h.info[id].parent] = append(c.children[h.info[id].parent], id)
				}
			}
		}
	}
	return c
}

// mustWriteThrough notes, at the first pass that finds backup obj about to go, every block through
// its pages whose every page is in a committed backup (whole in committed L2, over any objects: the
// pass writes it) as one its group must write. A page of a live backup is its tree node's, which
// points into that backup (served.go), so the tree's path through the block is in committed L2
// exactly where these pages are.
func (g *group) mustWriteThrough(obj uint64, inL2 *committedPages) {
	if g.passed == nil {
		g.passed = map[uint64]bool{}
	}
	g.passed[obj] = true
	h := &g.held
	blockPages := g.j.cfg.L3.BlockTokens / g.j.cfg.Geometry.PageTokens
	for _, s := range h.backups[obj] {
		id, ok := h.slots[s]
		if !ok || !inL2.in[id] {
			continue
		}
		first := h.info[id].index / blockPages * blockPages
		up := []uint64{
			id,
		} // the block's pages from its first to this one, if all are in committed backups
		for x := id; h.info[x].index > first && up != nil; {
			if x = h.info[x].parent; inL2.in[x] {
				up = append([]uint64{x}, up...)
			} else {
				up = nil
			}
		}
		if up != nil {
			g.mustWriteBelow(up, first+blockPages, inL2)
		}
	}
}

// mustWriteBelow notes the blocks that continue path (pages in committed backups) to page index end
// over any of their next pages in committed backups.
func (g *group) mustWriteBelow(path []uint64, end int, inL2 *committedPages) {
	h := &g.held
	last := path[len(path)-1]
	if h.info[last].index+1 == end {
		var tokens []int32
		for _, id := range path {
			tokens = append(tokens, h.info[id].tokens...)
		}
		if g.mustWrite == nil {
			g.mustWrite = map[uint64][2]int{}
		}
		startPos := h.info[path[0]].index * g.j.cfg.Geometry.PageTokens
		g.mustWrite[blockID(startPos, tokens)] = [2]int{startPos, startPos + len(tokens) - 1}
		return
	}
	for _, next := range inL2.children[last] {
		g.mustWriteBelow(append(path[:len(path):len(path)], next), end, inL2)
	}
}

// writesBack checks a write_back block write against the last pass: one of its pages is in an
// object about to go.
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
	r.g.j.violate(
		r,
		fmt.Sprintf(
			"write_back: block write %d (tokens %d..%d) started while none of its L2 objects is about to be evicted (%d slots near eviction at the last consensus)",
			w.Seq,
			w.StartPos,
			w.StartPos+len(w.Tokens)-1,
			len(r.evictingSlots),
		),
	)
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
