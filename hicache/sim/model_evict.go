package sim

import (
	"slices"
	"sort"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The sequential model's L1 eviction, its backups and its L2 (model.go).

func (m *cacheModel) take(n int) []int {
	if n > m.cfg.DevicePages {
		return nil
	}
	leaving := 0
	for m.cfg.DevicePages-m.l1Used+leaving < n {
		freed, backedUp := m.evictL1(n - (m.cfg.DevicePages - m.l1Used) - leaving)
		if freed+backedUp == 0 {
			return nil
		}
		leaving += backedUp
	}
	if m.cfg.DevicePages-m.l1Used < n {
		return nil
	}
	pages := make([]int, n)
	for i := range pages {
		m.nextPage++
		pages[i] = m.nextPage
	}
	m.l1Used += n
	return pages
}

func (m *cacheModel) evictL1(need int) (freed, backedUp int) {
	var cands []*mNode
	m.each(m.root, func(n *mNode) {
		if m.evictable(n) {
			cands = append(cands, n)
		}
	})
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		return a.lastAccess < b.lastAccess || a.lastAccess == b.lastAccess && a.id < b.id
	})
	for _, n := range cands {
		if freed+backedUp >= need {
			break
		}
		k := len(n.pages)
		if m.evictNode(n) {
			freed += k
		} else {
			backedUp += k
		}
	}
	return freed, backedUp
}

func (m *cacheModel) each(n *mNode, fn func(*mNode)) {
	for _, c := range n.children {
		fn(c)
		m.each(c, fn)
	}
}

// evictable: in L1, not on a path this step, no copy on its pages, no child in L1.
func (m *cacheModel) evictable(n *mNode) bool {
	if n.pages == nil || n.locked || m.pinned(n.pages) {
		return false
	}
	for _, c := range n.children {
		if c.pages != nil {
			return false
		}
	}
	return true
}

func (m *cacheModel) evictNode(n *mNode) bool {
	if n.obj == 0 && m.cfg.Policy == cache.WriteBack {
		if w := m.backup(n); w != nil {
			w.evictOnCommit = true
			return false
		}
	}
	m.l1Used -= len(n.pages)
	n.pages = nil
	m.tally.L1Evictions++
	m.prune(n)
	return true
}

// prune removes n and then its parents while they hold nothing and have no children.
func (m *cacheModel) prune(n *mNode) {
	for n != m.root && n.obj == 0 && n.pages == nil && len(n.children) == 0 && !n.locked {
		p := n.parent
		p.children = slices.DeleteFunc(p.children, func(c *mNode) bool { return c == n })
		n = p
	}
}

// backup reserves L2 for a node: evicting committed, unprotected objects oldest first (the policy's
// order) if that makes room, and nothing at all if it cannot or the policy does not admit it.
func (m *cacheModel) backup(n *mNode) *mWrite {
	need := len(n.tokens) / m.pt()
	if need > m.cfg.Geometry.Slots {
		m.tally.ReserveMisses++
		return nil
	}
	m.seq++
	used, evictable := 0, []uint64{}
	for id, o := range m.objs {
		used += o.pages
		if o.committed && o.refs == 0 {
			evictable = append(evictable, id)
		}
	}
	sort.Slice(evictable, func(i, j int) bool { return m.older(evictable[i], evictable[j]) })
	free := m.cfg.Geometry.Slots - used
	if !m.admitted(n, need, free) {
		m.tally.ReserveMisses++ // the core counts a refusal with the capacity misses
		return nil
	}
	room := free
	for _, id := range evictable {
		room += m.objs[id].pages
	}
	if free < need && room < need {
		m.tally.ReserveMisses++
		return nil
	}
	for i := 0; free < need; i++ {
		free += m.objs[evictable[i]].pages
		m.dropObject(evictable[i])
	}
	m.objs[m.seq] = &mObj{pages: need, clock: m.clock}
	n.obj = m.seq
	m.pin(n.pages, 1)
	m.writes = append(m.writes, mWrite{obj: m.seq, node: n, pages: slices.Clone(n.pages)})
	m.tally.BackupReserved++
	return &m.writes[len(m.writes)-1]
}

// dropObject evicts an L2 object: the nodes pointing into it lose it, and those left empty go.
func (m *cacheModel) dropObject(id uint64) {
	delete(m.objs, id)
	m.tally.L2Evictions++
	var holders []*mNode
	m.each(m.root, func(n *mNode) {
		if n.obj == id {
			holders = append(holders, n)
		}
	})
	for _, n := range holders {
		n.obj = 0
	}
	for _, n := range holders {
		m.prune(n)
	}
}

// consensus ends a step: the last step's audit holds go, this step's backups commit (each held
// until the next consensus; write_back's evict once committed) and its load-backs are released.
func (m *cacheModel) consensus() {
	for _, id := range m.held {
		m.objs[id].refs--
	}
	m.held = nil
	writes := m.writes
	m.writes = nil
	for _, w := range writes {
		o := m.objs[w.obj]
		o.committed = true
		o.refs++
		m.held = append(m.held, w.obj)
		m.pin(w.pages, -1)
		m.tally.BackupCommitted++
		if w.evictOnCommit && m.evictable(w.node) {
			m.evictNode(w.node)
		}
	}
	for _, l := range m.loads {
		m.pin(l.pages, -1)
		m.objs[l.obj].refs--
	}
	m.loads = nil
}

func (m *cacheModel) pin(pages []int, d int) {
	for _, p := range pages {
		m.pins[p] += d
	}
}

func (m *cacheModel) pinned(pages []int) bool {
	for _, p := range pages {
		if m.pins[p] != 0 {
			return true
		}
	}
	return false
}
