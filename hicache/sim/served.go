package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The served-prefix model: a bound on the prefix the core's tree serves each request (cache.PrefetchPlan.Usable,
// which the prefetch decision counts from), from what the simulator saw written where, not from the tree. A page
// is named by its tokens and their position (pageID: what the content function and so every byte check knows of
// it). CP rank 0's Env sees every write of its device pages (a Fill: the tokens computed; a load-back: what its
// slots held) and of the slots of its backups (what their device pages held); when a step's decision begins the
// core shows it the device pages taken and which backups are live and committed (cache.L2View). The tree serves
// a node only from device pages it holds or from its committed L2 object, so every page of a served prefix must
// be held now by a taken device page or a slot of a committed backup, or have been read by an L3 prefetch (whose
// objects and slots the Env does not see: every block any reader started, a looser bound). A decision counting a
// page past the tree's usable KV (served_prefix_page_long), or a tree whose served prefix runs on through nodes
// whose KV was evicted from L1 and L2 (served_prefix_hollow), counts one that is held nowhere, unless the same
// tokens at the same place are held under another prefix. What it cannot see: a prefix served short. A page is named by
// its tokens and position, not the path before them (another path may hold the same tokens there), and a
// load-back from a prefetched slot leaves its device page's name stale or unknown (a prefetch's object and slots
// are not the Env's to see), so what is held over-approximates what the tree can serve: an upper bound only.

// heldModel is CP rank 0's account of what each device page and backup slot holds, by page identity.
type heldModel struct {
	device     map[int32]uint64          // device page -> the page it holds
	slots      map[cache.SlabSlot]uint64 // L2 slot -> the page a backup copied into it
	backups    map[uint64][]cache.SlabSlot
	prefetched map[uint64]bool // every page an L3 prefetch read started on, by any reader
	now        map[uint64]bool // the pages held when the step's decision began (planning)
}

// pageID names page tokens at position startPos (blockID's hash over one page).
func pageID(startPos int, tokens []int32) uint64 { return blockID(startPos, tokens) }

func (h *heldModel) init() {
	if h.device == nil {
		h.device, h.slots, h.backups = map[int32]uint64{}, map[cache.SlabSlot]uint64{}, map[uint64][]cache.SlabSlot{}
		h.prefetched, h.now = map[uint64]bool{}, map[uint64]bool{}
	}
}

// filled notes a Fill on CP rank 0: its device pages hold its tokens.
func (r *rank) filled(f *cache.Fill) {
	if r.cp != 0 || !r.g.j.cfg.L3.Enabled {
		return
	}
	h, pt := &r.g.held, r.g.j.cfg.Geometry.PageTokens
	h.init()
	for i, page := range f.DevicePages {
		h.device[page] = pageID(f.StartPos+i*pt, f.Tokens[i*pt:(i+1)*pt])
	}
}

// copied notes a copy started on CP rank 0: a backup's slots hold what its device pages held, a load-back's
// device pages what its slots held (nothing known when the slot was a prefetch's: the prefetched pages cover it).
func (r *rank) copied(c *cache.Copy) {
	if r.cp != 0 || !r.g.j.cfg.L3.Enabled {
		return
	}
	h := &r.g.held
	h.init()
	if c.Gather {
		h.backups[c.Object] = append(h.backups[c.Object], c.Slots...)
	}
	for i, page := range c.DevicePages {
		slot := c.Slots[i]
		if c.Gather {
			if id, ok := h.device[page]; ok {
				h.slots[slot] = id
			} else {
				delete(h.slots, slot)
			}
		} else if id, ok := h.slots[slot]; ok {
			h.device[page] = id
		} else {
			delete(h.device, page)
		}
	}
}

// readPages notes the pages of a block an L3 read started on (any reader).
func (g *group) readPages(w *cache.BlockRead) {
	c, ok := g.j.blocks.content[w.Key]
	if !ok {
		return // a key no prompt names: the coverage check's
	}
	g.held.init()
	pt := g.j.cfg.Geometry.PageTokens
	for i := 0; i+pt <= len(c.tokens); i += pt {
		g.held.prefetched[pageID(c.startPos+i, c.tokens[i:i+pt])] = true
	}
}

// planning takes, on CP rank 0, the pages held as the step's decision begins: those of its taken device pages,
// and of the slots of its live committed backups (those gone are forgotten: object ids are never reused).
func (r *rank) planning(v cache.L2View) {
	h := &r.g.held
	h.init()
	clear(h.now)
	r.g.reservations = r.g.reservations[:0]
	for _, page := range v.DeviceTaken() {
		if id, ok := h.device[page]; ok {
			h.now[id] = true
		}
	}
	for obj, slots := range h.backups {
		live, committed := v.Object(obj)
		if !live {
			delete(h.backups, obj)
			continue
		}
		for _, s := range slots {
			if id, ok := h.slots[s]; ok && committed {
				h.now[id] = true
			}
		}
	}
}

// checkServed checks each request's served prefix against the pages held when the decision began.
func (g *group) checkServed(r *rank, step int64, plans []cache.PrefetchPlan) bool {
	pt := g.j.cfg.Geometry.PageTokens
	h := &g.held
	for _, p := range plans {
		ids := p.Request.InputIDs
		if p.Usable < 0 || p.Usable%pt != 0 || p.Usable > len(ids)/pt*pt {
			g.j.violate(r, fmt.Sprintf("L3 prefetch decision at step %d: a request of %d tokens served %d by the tree: not whole pages of its prompt",
				step, len(ids), p.Usable))
			return false
		}
		for at := 0; at < p.Usable; at += pt {
			if id := pageID(at, ids[at:at+pt]); !h.now[id] && !h.prefetched[id] {
				g.j.violate(r, fmt.Sprintf("L3 prefetch decision at step %d: the tree served tokens 0..%d of a request of %d, but tokens %d..%d are held on no device page taken, in no committed backup and were read by no prefetch",
					step, p.Usable-1, len(ids), at, at+pt-1))
				return false
			}
		}
		g.j.models.ServedPages += int64(p.Usable / pt)
	}
	return true
}
