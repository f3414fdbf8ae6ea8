package sim

import (
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// group is one CP group of the job: its ranks, its shared memory, its share of the events, and what
// the scheduler keeps for its collectives and its checks.
type group struct {
	j        *job
	index    int
	ranks    []*rank
	mem      *Memory
	events   []workload.Event // CP rank 0's, not yet sent
	all      []workload.Event // the whole share, for the sequential model
	sent     map[int64][]workload.Event
	sentUpTo int64
	// a serving-clock job's: each step's earliest start and its events' queue entries as CP rank
	// 0 formed them (clockstep.go)
	sentStart  map[int64]int64
	sentQueued map[int64][]serving.Queued
	arrived    []*rank
	hashes     map[int64][]uint64
	// a recordless divergence's group: by step, each rank's placements hash (recordless.go)
	placements map[int64][]uint64
	refs       map[partKey][]*pending
	// by backup seq, the nodes whose auditor checked it in the step in progress
	audited map[uint64][]int
	// prefetches, by prefetch seq (replicated): the blocks its readers read, and whether any read
	// failed (blocks.go)
	prefetches map[uint64]*prefetchRecord
	// slot parts a prefetch read filled, by its seq, not yet loaded back (provenance.go)
	prefetched map[partKey]uint64
	// write_through: blocks whole in a committed backup, by blockID, their tokens' span
	mustWrite map[uint64][2]int
	wrote     map[uint64]bool // blocks a writer of the group started writing, by blockID
	// write_back (writeback.go): what each audited L2 object holds, by object id (never reused),
	// and the backups a near-eviction pass found about to go (CP rank 0's)
	auditedObjects map[uint64]auditedObject
	passed         map[uint64]bool
	// the existence-vote model (votes.go): checks by seq, prefetches by seq, those not yet resolved
	// (CP rank 0's view)
	votes      map[uint64]*checkVote
	started    map[uint64]*prefetchStart
	unresolved []uint64
	// the prefetch-decision model (plan.go): the back-off from agreed outcomes, and each prefetch's
	// blocks
	backOff    backOffModel
	planBlocks map[uint64]int
	// the served-prefix model (served.go), and the step's prefetch reservations with the L2's room
	// (plan.go)
	held         heldModel
	reservations []reservation
}

// partsOf lists the parts of slots that an operation touches: rank's own, or (rank -1) every rank's
// on node, the parts an L3 block file of that node holds.
func (g *group) partsOf(slots []cache.SlabSlot, rank, node int) []partKey {
	var out []partKey
	onNode := g.j.placement.Node
	for _, s := range slots {
		for r := range g.j.cfg.CP {
			if r == rank || rank < 0 && onNode[r] == node {
				out = append(out, partKey{slab: s.Slab, slot: s.Slot, rank: int32(r)})
			}
		}
	}
	return out
}

// reference applies the reference rule to work about to start, then records its parts: no part may
// be written while another operation references it, nor referenced while another writes it,
// whichever rank does either.
func (g *group) reference(p *pending) {
	for _, k := range p.parts {
		for _, q := range g.refs[k] {
			if p.writes || q.writes {
				g.j.violate(
					p.rank,
					fmt.Sprintf(
						"slot %d of slab %d (CP rank %d's part) is reused under a live reference: %s on CP rank %d started while %s on CP rank %d still %s it",
						k.slot,
						k.slab,
						k.rank,
						describe(p.work),
						p.rank.cp,
						describe(q.work),
						q.rank.cp,
						map[bool]string{true: "writes", false: "reads"}[q.writes],
					),
				)
				return
			}
		}
		g.refs[k] = append(g.refs[k], p)
	}
}

func (g *group) release(p *pending) {
	for _, k := range p.parts {
		refs := g.refs[k]
		if i := slices.Index(refs, p); i >= 0 {
			refs = slices.Delete(refs, i, i+1)
		}
		if len(refs) == 0 {
			delete(g.refs, k)
		} else {
			g.refs[k] = refs
		}
	}
}

func describe(w cache.Work) string {
	switch w := w.(type) {
	case *cache.Copy:
		if w.Gather {
			return fmt.Sprintf("backup %d of L2 object %d", w.Seq, w.Object)
		}
		return fmt.Sprintf("load-back %d of L2 object %d", w.Seq, w.Object)
	case *cache.BlockWrite:
		return fmt.Sprintf("L3 block write %d", w.Seq)
	case *cache.BlockRead:
		return fmt.Sprintf("L3 read of block %d of prefetch %d", w.Block, w.Prefetch)
	}
	return "work"
}

// arrive enters r into the group's collective; the last rank in reduces and releases them all.
// Collectives that cannot pair (another operation, length or transport: an MPI all-reduce never
// meets an NCCL one) are a violation even after an injected divergence: whatever a diverged rank
// decides, the calls it can enter must pair, so that the next consensus names the divergence
// instead of a hang that the watchdog would name.
func (g *group) arrive(r *rank) {
	g.arrived = append(g.arrived, r)
	if len(g.arrived) < len(g.ranks) {
		return
	}
	first := g.arrived[0].coll
	for _, x := range g.arrived[1:] {
		c := x.coll
		if c.Op != first.Op || len(c.Words) != len(first.Words) || c.Transport != first.Transport {
			g.j.violateEvenDiverged(
				x,
				fmt.Sprintf(
					"collectives that cannot pair: CP rank %d entered %s (%d words, %s), CP rank %d %s (%d words, %s)",
					g.arrived[0].cp,
					first.Kind,
					len(first.Words),
					transportName(first.Transport),
					x.cp,
					c.Kind,
					len(c.Words),
					transportName(c.Transport),
				),
			)
			return
		}
	}
	out := slices.Clone(first.Words)
	for _, x := range g.arrived {
		for i, w := range x.coll.Words {
			if first.Op == cache.OpGather {
				if i == x.cp {
					out[i] = w // each rank brings its own word, at its index
				}
			} else {
				out[i] = min(out[i], w)
			}
		}
	}
	for _, x := range g.arrived {
		copy(x.coll.Words, out)
		x.collDone = true
	}
	g.arrived = g.arrived[:0]
}

// reportHash collects each rank's state hash at the end of a step and compares them once every rank
// has one.
func (g *group) reportHash(r *rank, step int64, h uint64) {
	hs := g.hashes[step]
	if hs == nil {
		hs = make([]uint64, 0, len(g.ranks))
	}
	hs = append(hs, h, uint64(r.cp))
	if len(hs) < 2*len(g.ranks) {
		g.hashes[step] = hs
		return
	}
	delete(g.hashes, step)
	g.checkAudits(r, step)
	for i := 2; i < len(hs); i += 2 {
		if hs[i] != hs[0] {
			g.j.violate(
				r,
				fmt.Sprintf(
					"the ranks' states differ at the end of step %d: CP rank %d's hash %016x, CP rank %d's %016x",
					step,
					hs[1],
					hs[0],
					hs[i+1],
					hs[i],
				),
			)
			return
		}
	}
}

// slabs is the group's shared L2 as the rank's L3 block I/O sees it: its node's slabs, holding its
// node's parts.
func (r *rank) slabs() l3.Slabs {
	return l3.Slabs{Geometry: r.g.j.cfg.Geometry, Mem: r.g.mem.NodeSlabs[r.node]}
}

// checkAudits runs once every rank ended step: every object committed in it was audited on every
// node of the group, once (the consensus that commits it is the same on every rank, and each node's
// auditor checks it there). An object audited on some nodes only left the others' parts unchecked.
func (g *group) checkAudits(r *rank, step int64) {
	nodes := max(1, g.j.cfg.Geometry.Nodes)
	seqs := make([]uint64, 0, len(g.audited))
	for seq := range g.audited {
		seqs = append(seqs, seq)
	}
	slices.Sort(seqs) // the map only gathers them; the first one reported comes from here
	for _, seq := range seqs {
		got := slices.Sorted(slices.Values(g.audited[seq]))
		want := make([]int, nodes)
		for i := range want {
			want[i] = i
		}
		if !slices.Equal(got, want) {
			g.j.violate(
				r,
				fmt.Sprintf(
					"backup %d was committed in step %d and audited on nodes %v of the group's %d: every node's auditor must check its parts",
					seq,
					step,
					got,
					nodes,
				),
			)
			break
		}
	}
	clear(g.audited)
}

func transportName(transport bool) string {
	if transport {
		return "the step's transport"
	}
	return "MPI"
}
