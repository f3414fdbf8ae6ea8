package sim

import (
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/hicache/workload"
)

// The served-prefix model: bounds on the prefix the core's tree serves each request
// (cache.PrefetchPlan.Usable, which the prefetch decision counts from), from what the simulator saw
// written where, not from the tree. A page is named by its path: its prompt's tokens up to its end
// (pathIDs), as the tree's one node for it is. CP rank 0's Env sees every write of its device pages
// (a Fill, within the serve of a request the core names: the computed KV of that request's path; a
// load-back: what its backup's slots held) and of its backups' slots (what their device pages
// held); when a step's decision begins the core shows it the device pages taken and which backups
// are live and committed (cache.L2View). What it names is exact or unnamed: a load-back from an
// object that is no backup (a prefetch's, whose object and slots no Env call names) leaves its
// device pages unnamed.
//
// Above: the tree serves a node only from device pages it holds or from its committed L2 object, so
// every page of a served prefix must be held now, or have been read by an L3 prefetch (every block
// any reader started). Below: a page held is its node's (one node a path; a device page taken was
// written, by rank 0, by whoever took it; a live backup's node points into it until it goes), so
// the tree serves at least up to the first page not held. A decision counting a page past the
// tree's usable KV (served_prefix_page_long), a tree whose served prefix runs on through nodes
// whose KV was evicted from L1 and L2 (served_prefix_hollow), and one that stops a page short of it
// (served_prefix_page_short) are each a wrong value every rank agrees and no byte contradicts.

// heldModel is CP rank 0's account of what each device page and backup slot holds, by page path.
type heldModel struct {
	servingIDs []int32                   // the prompt of the request being served
	serving    []uint64                  // its path ids (its Fills' pages)
	device     map[int32]uint64          // device page -> the page it holds
	slots      map[cache.SlabSlot]uint64 // L2 slot -> the page a backup copied into it
	backups    map[uint64][]cache.SlabSlot
	prefetched map[uint64]bool // every page an L3 prefetch read started on, by any reader
	now        map[uint64]bool // the pages held when the step's decision began (planning)
	info       map[uint64]pageInfo
}

// pageInfo is what a named page is (writeback.go walks the pages of blocks with it): the page
// before it on its path (0 for the first), its index on the path, and its tokens.
type pageInfo struct {
	parent uint64
	index  int
	tokens []int32
}

// pathIDs names each whole page of ids by its path: the id of page k hashes ids[:(k+1)*pt].
func pathIDs(ids []int32, pt int) []uint64 {
	out := make([]uint64, len(ids)/pt)
	id := uint64(0x70617468)
	for k := range out {
		id = l3block.ChainKey(id, ids[k*pt:(k+1)*pt])
		out[k] = id
	}
	return out
}

func (h *heldModel) init() {
	if h.device == nil {
		h.device, h.slots, h.backups = map[int32]uint64{}, map[cache.SlabSlot]uint64{}, map[uint64][]cache.SlabSlot{}
		h.prefetched, h.now, h.info = map[uint64]bool{}, map[uint64]bool{}, map[uint64]pageInfo{}
	}
}

// parentID is the id of the page before page k of a path (0 before the first).
func parentID(path []uint64, k int) uint64 {
	if k == 0 {
		return 0
	}
	return path[k-1]
}

// serving notes, on CP rank 0, the request whose serve writes the next Fills.
func (r *rank) serving(req *workload.Request) {
	if r.g.j.cfg.L3.Enabled {
		r.g.held.servingIDs, r.g.held.serving = req.InputIDs, pathIDs(
			req.InputIDs,
			r.g.j.cfg.Geometry.PageTokens,
		)
	}
}

// filled notes a Fill on CP rank 0: its device pages hold its pages of the served request's path.
func (r *rank) filled(f *cache.Fill) {
	if r.cp != 0 || !r.g.j.cfg.L3.Enabled {
		return
	}
	h, pt := &r.g.held, r.g.j.cfg.Geometry.PageTokens
	h.init()
	for i, page := range f.DevicePages {
		at := f.StartPos + i*pt
		if at+pt <= len(h.servingIDs) &&
			slices.Equal(f.Tokens[i*pt:(i+1)*pt], h.servingIDs[at:at+pt]) {
			k := at / pt
			h.device[page] = h.serving[k]
			if _, ok := h.info[h.serving[k]]; !ok && r.g.j.cfg.L3.WritePolicy == cache.L3WriteBack {
				h.info[h.serving[k]] = pageInfo{
					parent: parentID(h.serving, k),
					index:  k,
					tokens: h.servingIDs[at : at+pt],
				}
			}
		} else {
			delete(h.device, page) // not the served request's path: unnamed
		}
	}
}

// copied notes a copy started on CP rank 0: a backup's slots hold what its device pages held, a
// load-back's device pages what its backup's slots held (nothing named from an object that is no
// backup: a prefetch's).
func (r *rank) copied(c *cache.Copy) {
	if r.cp != 0 || !r.g.j.cfg.L3.Enabled {
		return
	}
	h := &r.g.held
	h.init()
	if c.Gather {
		h.backups[c.Object] = append(h.backups[c.Object], c.Slots...)
	}
	_, fromBackup := h.backups[c.Object]
	for i, page := range c.DevicePages {
		slot := c.Slots[i]
		if c.Gather {
			if id, ok := h.device[page]; ok {
				h.slots[slot] = id
			} else {
				delete(h.slots, slot)
			}
		} else if id, ok := h.slots[slot]; ok && fromBackup {
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
	ids := pathIDs(c.prompt[:c.startPos+len(c.tokens)], pt)
	for _, id := range ids[c.startPos/pt:] {
		g.held.prefetched[id] = true
	}
}

// planning takes, on CP rank 0, the pages held as the step's decision begins: those of its taken
// device pages, and of the slots of its live committed backups (those gone are forgotten: object
// ids are never reused).
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

// checkServed checks each request's served prefix against the pages held when the decision began:
// no page beyond them, unless a prefetch read it, and none short of the first page not held.
func (g *group) checkServed(r *rank, step int64, plans []cache.PrefetchPlan) bool {
	pt := g.j.cfg.Geometry.PageTokens
	h := &g.held
	for _, p := range plans {
		ids := p.Request.InputIDs
		if p.Usable < 0 || p.Usable%pt != 0 || p.Usable > len(ids)/pt*pt {
			g.j.violate(
				r,
				fmt.Sprintf(
					"L3 prefetch decision at step %d: a request of %d tokens served %d by the tree: not whole pages of its prompt",
					step,
					len(ids),
					p.Usable,
				),
			)
			return false
		}
		path, held := pathIDs(ids, pt), 0
		for held < len(path) && h.now[path[held]] {
			held++
		}
		for k := held; k < p.Usable/pt; k++ {
			if !h.now[path[k]] && !h.prefetched[path[k]] {
				g.j.violate(
					r,
					fmt.Sprintf(
						"L3 prefetch decision at step %d: the tree served the first %d tokens of a request of %d, but tokens %d..%d are held on no device page taken, in no committed backup and were read by no prefetch",
						step,
						p.Usable,
						len(ids),
						k*pt,
						k*pt+pt-1,
					),
				)
				return false
			}
		}
		if p.Usable < held*pt {
			g.j.violate(
				r,
				fmt.Sprintf(
					"L3 prefetch decision at step %d: the tree served the first %d tokens of a request of %d, but it holds its first %d on device pages taken or in committed backups",
					step,
					p.Usable,
					len(ids),
					held*pt,
				),
			)
			return false
		}
		g.j.models.ServedPages += int64(p.Usable / pt)
		g.j.models.ServedFloor += int64(held)
	}
	return true
}
