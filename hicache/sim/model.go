package sim

import (
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/workload"
)

// cacheModel is a deliberately plain, sequential statement of the cache's policies, to check the
// controller's decisions against: no allocator, no device pool, no copies, no consensus. Every step
// is drained (as runRank drains), so a backup is committed at the end of the step that issued it.
//
// What it models: the prefix match at page granularity with node splits; L1 hits, L2 load-backs,
// the recompute of the rest; L1 eviction (least recently used, ties by node id, leaves first,
// nothing locked by the step or pinned by a copy); the write policies, write_back's
// backup-on-evict; L2 as a capacity in slots with LRU eviction (logical clock, ties by object id)
// of committed, unprotected objects, all or nothing, or the job's other policy (model_policy.go);
// the protection of load-backs until the consensus and the audit hold until the next one; flush.
//
// What it leaves out: where objects are placed in L2. The allocator takes the lowest free slots
// across extents and slabs, so a reservation never fails for fragmentation, only for capacity
// (checked in pool's own model test); the object table is never the limit here because geometry's
// MaxObjects defaults to Slots and every object holds at least one slot. Content and verification
// are left to the controller's own checks.
type cacheModel struct {
	cfg      cache.Config
	root     *mNode
	nextID   uint64
	clock    uint64
	seq      uint64 // backups and load-backs share one sequence; an object's id is its backup's seq
	l1Used   int
	nextPage int
	pins     map[int]int // device page -> copies using it
	objs     map[uint64]*mObj
	writes   []mWrite          // issued this step, committed at its consensus
	loads    []mLoad           // issued this step, released at its consensus
	held     []uint64          // committed at the last consensus: protected until this one
	locked   []*mNode          // on a path this step
	seen     map[uint64]uint64 // admit_seen: the key each bucket saw last (model_policy.go)
	outcomes []cache.Outcome
	tally    cache.Counters // the fields the model counts, named as the core does
}

type mNode struct {
	id         uint64
	parent     *mNode
	children   []*mNode
	tokens     []int32
	pages      []int // device pages, nil when not in L1
	obj        uint64
	lastAccess uint64
	hits       int
	locked     bool
}

type mObj struct {
	pages, refs int
	clock       uint64
	committed   bool
	protected   bool // SLRU's protected segment
}

type mWrite struct {
	obj           uint64
	node          *mNode
	pages         []int
	evictOnCommit bool
}

type mLoad struct {
	obj   uint64
	pages []int
}

func newCacheModel(cfg cache.Config) *cacheModel {
	m := &cacheModel{cfg: cfg}
	m.reset()
	return m
}

func (m *cacheModel) reset() {
	m.root, m.nextID, m.l1Used, m.pins, m.objs = &mNode{}, 1, 0, map[int]int{}, map[uint64]*mObj{}
	m.seen = map[uint64]uint64{}
	m.writes, m.loads, m.held = nil, nil, nil
}

// run replays events in the steps the real run takes (JobConfig.takeStep), flushing after every
// FlushEvery-th step as well. A serving-clock job's steps are those CP rank 0 sent (sent, by step):
// its clock formed them from the hits its core served, and the model, serving the same hits, takes
// the same steps.
func (m *cacheModel) run(events []workload.Event, j *JobConfig, sent map[int64][]workload.Event) {
	flushEvery := j.FlushEvery
	step := int64(0)
	for rest := events; ; {
		var b []workload.Event
		if j.Clock != nil {
			b = sent[step+1]
		} else {
			b = j.takeStep(&rest, step+1)
		}
		if b == nil {
			break
		}
		step++
		if len(b) > 0 && b[0].Flush {
			m.flush()
		} else {
			for _, e := range b {
				m.serve(e.Request.InputIDs)
			}
		}
		for _, n := range m.locked {
			n.locked = false
		}
		m.locked = nil
		m.consensus()
		if flushEvery > 0 && step%flushEvery == 0 {
			m.flush()
		}
	}
	m.consensus()
}

func (m *cacheModel) flush() {
	m.consensus()
	m.reset()
	m.tally.Flushes++
}

func (m *cacheModel) pt() int { return m.cfg.Geometry.PageTokens }

func (m *cacheModel) serve(ids []int32) {
	m.clock++
	m.tally.Requests++
	tokens := ids[:len(ids)/m.pt()*m.pt()]
	out := cache.Outcome{Computed: int64(len(ids) - len(tokens))}
	path := m.walk(tokens)
	hit := 0
	usable := 0
	for _, n := range path {
		kind := m.hit(n)
		if kind == 0 {
			break
		}
		if kind == 1 {
			out.L1Hit += int64(len(n.tokens))
		} else {
			out.L2Hit += int64(len(n.tokens))
		}
		hit += len(n.tokens)
		usable++
	}
	out.Computed += int64(len(tokens) - hit)
	m.outcomes = append(m.outcomes, out)
	m.computeRest(tokens, path, usable)
}

// walk matches tokens page by page, splitting the last matched node where the tokens leave it.
func (m *cacheModel) walk(tokens []int32) []*mNode {
	var path []*mNode
	cur, pos, p := m.root, 0, m.pt()
	for pos+p <= len(tokens) {
		var child *mNode
		for _, c := range cur.children {
			if slices.Equal(c.tokens[:p], tokens[pos:pos+p]) {
				child = c
			}
		}
		if child == nil {
			break
		}
		matched := p
		for matched < len(child.tokens) && pos+matched+p <= len(tokens) &&
			slices.Equal(child.tokens[matched:matched+p], tokens[pos+matched:pos+matched+p]) {
			matched += p
		}
		if matched < len(child.tokens) {
			child = m.split(child, matched)
		}
		child.locked = true
		m.locked = append(m.locked, child)
		path = append(path, child)
		cur, pos = child, pos+matched
	}
	return path
}

// split puts a new node for the first at tokens above n; n keeps its id for the rest.
func (m *cacheModel) split(n *mNode, at int) *mNode {
	k := at / m.pt()
	head := &mNode{
		id:         m.nextID,
		parent:     n.parent,
		children:   []*mNode{n},
		tokens:     n.tokens[:at],
		obj:        n.obj,
		lastAccess: n.lastAccess,
		hits:       n.hits,
		locked:     n.locked,
	}
	m.nextID++
	if n.pages != nil {
		head.pages, n.pages = n.pages[:k], n.pages[k:]
	}
	n.parent.children[slices.Index(n.parent.children, n)] = head
	n.parent, n.tokens = head, n.tokens[at:]
	if head.locked {
		m.locked = append(m.locked, head)
	}
	return head
}

// hit serves one node: 1 from L1, 2 by a load-back from L2, 0 when it holds no usable KV.
func (m *cacheModel) hit(n *mNode) int {
	n.lastAccess = m.clock
	n.hits++
	if n.pages != nil {
		m.touch(n)
		if m.cfg.Policy == cache.WriteThroughSelective && n.hits >= 2 && n.obj == 0 &&
			!m.pinned(n.pages) {
			m.backup(n)
		}
		return 1
	}
	o := m.objs[n.obj]
	if o == nil || !o.committed {
		return 0
	}
	o.refs++ // before L1 makes room: write_back's backups must not evict it
	pages := m.take(len(n.tokens) / m.pt())
	if pages == nil {
		o.refs--
		return 0
	}
	m.seq++
	m.pin(pages, 1)
	m.loads = append(m.loads, mLoad{obj: n.obj, pages: pages})
	n.pages = pages
	m.tally.LoadBacks++
	m.touch(n)
	return 2
}

func (m *cacheModel) touch(n *mNode) {
	if o := m.objs[n.obj]; o != nil {
		o.clock = m.clock
		m.promote(n.obj)
	}
}

func (m *cacheModel) computeRest(tokens []int32, path []*mNode, usable int) {
	parent, pos := m.root, 0
	for i, n := range path {
		if i >= usable && n.pages == nil {
			if n.pages = m.take(len(n.tokens) / m.pt()); n.pages == nil {
				m.tally.Uncached += int64(len(n.tokens) / m.pt())
			} else if m.cfg.Policy == cache.WriteThrough && n.obj == 0 {
				m.backup(n)
			}
		}
		parent, pos = n, pos+len(n.tokens)
	}
	if pos == len(tokens) {
		return
	}
	pages := m.take((len(tokens) - pos) / m.pt())
	if pages == nil {
		m.tally.Uncached += int64((len(tokens) - pos) / m.pt())
		return
	}
	leaf := &mNode{
		id:         m.nextID,
		parent:     parent,
		tokens:     tokens[pos:],
		pages:      pages,
		lastAccess: m.clock,
		hits:       1,
	}
	m.nextID++
	parent.children = append(parent.children, leaf)
	if m.cfg.Policy == cache.WriteThrough {
		m.backup(leaf)
	}
}

// take hands out n device pages, evicting from L1 until they fit, or nil. Pages of nodes write_back
// is backing up leave at the commit: they count toward the room made, but are not there yet.
