package sim

import (
	"fmt"
	"maps"
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The existence-vote model: how many blocks each prefetch the group agrees must read, from the
// answers the simulator itself gave the readers' existence checks. A rank's count is its leading
// run of found blocks: the blocks of the check's span before the first of its own that it was told
// is not there (its whole span when every one of its own was found); the group's is the MIN over
// its ranks, shifted to the prefix the tree serves when the prefetch starts, and capped by the room
// unresolved prefetches leave (an eighth of the L2, less the blocks they hold). The reference rule
// sees a count above some reader's answer (a read of a block it never found); only this model sees
// one below every answer: a vote off by one, or a prefetch stopped at its first block, reads fewer
// blocks than the L3 holds, which every rank agrees and no byte contradicts. The span a check
// covers is the core's to say, so the model checks it too (checkSpan): its request's blocks from
// the first it looks for to the prompt's last whole block or the prefetch cap, each looked for once
// on each node.

const (
	// prefetchBacklogShare: unresolved prefetches may hold at most this share of the L2 (DESIGN.md,
	// "The L3 tier").
	prefetchBacklogShare = 8
	// prefetchBlocksMax bounds one prefetch so that its block index fits the failed-prefetch word
	// (20 bits).
	prefetchBlocksMax = 1<<20 - 1
)

// checkVote is one existence check of a group (its seq is replicated): the span it covers, how many
// ranks look for each of its blocks and which key is its last block's, and each rank's run.
type checkVote struct {
	firstBlock, blocks int
	runs               map[int]int // by CP rank, once answered
	startedOn          int         // ranks that started it
	asked              map[int]int // by block index: ranks that look for it (one a node)
	lastKey            uint64      // the key of the highest block looked for
}

// ModelTally counts what the decision models checked in a job, proof that each ran where it
// matters: the existence-vote model's prefetches, those of them whose ranks' runs differed (the MIN
// decided), and check spans; the write_back model's writes near eviction and blocks it required
// written (writeback.go); the prefetch-decision model's requests (plan.go); the served-prefix
// model's pages (served.go).
type ModelTally struct {
	Prefetches, Split, Spans    int64
	WriteBacks, WriteBackBlocks int64
	// requests whose prefetch decision plan.go checked, of them those that waited for a prefetch,
	// and the reservations the L2 refused, each checked short of room
	Plans, PlanWaits, PlanMisses int64
	// pages of served prefixes checked against the served-prefix model (served.go), and those it
	// found held, which the prefixes had to reach
	ServedPages, ServedFloor int64
}

// add sums another job's tally into t.
func (t *ModelTally) add(o ModelTally) {
	t.Prefetches, t.Split, t.Spans = t.Prefetches+o.Prefetches, t.Split+o.Split, t.Spans+o.Spans
	t.WriteBacks, t.WriteBackBlocks = t.WriteBacks+o.WriteBacks, t.WriteBackBlocks+o.WriteBackBlocks
	t.Plans, t.PlanWaits, t.PlanMisses = t.Plans+o.Plans, t.PlanWaits+o.PlanWaits, t.PlanMisses+o.PlanMisses
	t.ServedPages, t.ServedFloor = t.ServedPages+o.ServedPages, t.ServedFloor+o.ServedFloor
}

// prefetchStart is one prefetch the group started, as its reads and its start notice show it.
type prefetchStart struct {
	blocks, firstBlock int      // -1 until a read of it starts
	check              uint64   // the existence check its count came from, as its reads name it
	heldBy             []uint64 // the prefetches not yet resolved when it started (the room it had)
}

// checkStarted records an existence check's span, and which of its blocks a rank looks for.
func (g *group) checkStarted(w *cache.ExistenceCheck) {
	if g.votes == nil {
		g.votes = map[uint64]*checkVote{}
	}
	v := g.votes[w.Seq]
	if v == nil {
		v = &checkVote{
			firstBlock: w.FirstBlock,
			blocks:     w.Blocks,
			runs:       map[int]int{},
			asked:      map[int]int{},
		}
		g.votes[w.Seq] = v
	}
	v.startedOn++
	B := g.j.cfg.L3.BlockTokens
	for _, key := range w.Keys {
		c, ok := g.j.blocks.content[key]
		if !ok {
			continue // checkAnswered names a key no prompt has, if the answer reaches it
		}
		v.asked[c.startPos/B]++
		if last, ok := g.j.blocks.content[v.lastKey]; !ok || c.startPos > last.startPos {
			v.lastKey = key
		}
	}
}

// checkSpan: a check's span is what one prefetch may read, from its first block to the end of its
// request's prompt, at most the prefetch cap (the failed-block word's bound, and half the L2), and
// every block of it is looked for once on each node. A span cut short counts the blocks after it as
// missing, below every reader's answer.
func (g *group) checkSpan(seq uint64, v *checkVote) bool {
	geo := g.j.cfg.Geometry
	limit := min(prefetchBlocksMax, geo.Slots/2/(g.j.cfg.L3.BlockTokens/geo.PageTokens))
	whole := len(v.asked) == v.blocks
	for b := v.firstBlock; b < v.firstBlock+v.blocks; b++ {
		whole = whole && v.asked[b] == max(1, geo.Nodes)
	}
	ends := v.blocks == limit || v.blocks > 0 && g.j.blocks.content[v.lastKey].endsPrompt
	if !whole || !ends || v.blocks > limit {
		g.j.violate(
			g.ranks[0],
			fmt.Sprintf(
				"L3 existence check %d spans blocks %d..%d (looked for: %v, one a node of %d), which is not its prompt's blocks up to the cap of %d",
				seq,
				v.firstBlock,
				v.firstBlock+v.blocks-1,
				v.asked,
				max(1, geo.Nodes),
				limit,
			),
		)
		return false
	}
	return true
}

// checkAnswered records r's run for an existence check the simulator answered found of w.Keys: the
// span's blocks before the block of its first key not found, by the block that key names
// (blocks.go), or the whole span.
func (r *rank) checkAnswered(w *cache.ExistenceCheck, found int) {
	v := r.g.votes[w.Seq]
	run := v.blocks
	if found < len(w.Keys) {
		c, ok := r.g.j.blocks.content[w.Keys[found]]
		if !ok {
			r.g.j.violate(
				r,
				fmt.Sprintf(
					"L3 existence check %d looks for key %016x, which names no block of the workload",
					w.Seq,
					w.Keys[found],
				),
			)
			return
		}
		run = c.startPos/r.g.j.cfg.L3.BlockTokens - v.firstBlock
	}
	v.runs[r.cp] = run
}

// prefetchNoticed records the start (on CP rank 0, the group's order) or the agreed outcome of a
// prefetch.
func (r *rank) prefetchNoticed(seq uint64, resolved bool) {
	g := r.g
	if !resolved {
		r.lastPrefetch = seq
	}
	if r.cp != 0 {
		return
	}
	if resolved {
		g.unresolved = slices.DeleteFunc(g.unresolved, func(s uint64) bool { return s == seq })
		g.backOff.resolved(g.prefetches[seq] != nil && g.prefetches[seq].failed, r.core.Step())
		return
	}
	g.prefetch(seq).heldBy = slices.Clone(g.unresolved)
	g.unresolved = append(g.unresolved, seq)
}

// prefetch is the record of prefetch seq, new when none of the group's ranks has seen it yet.
func (g *group) prefetch(seq uint64) *prefetchStart {
	if g.started == nil {
		g.started = map[uint64]*prefetchStart{}
	}
	p := g.started[seq]
	if p == nil {
		p = &prefetchStart{blocks: -1, firstBlock: -1}
		g.started[seq] = p
	}
	return p
}

// readStarted learns a prefetch's count and first block from one of its reads (any reader's: they
// are the same).
func (r *rank) readStarted(w *cache.BlockRead) {
	p := r.g.prefetch(w.Prefetch)
	c, ok := r.g.j.blocks.content[w.Key]
	if !ok || p.blocks >= 0 {
		// a read of a key no prompt names is the coverage check's; one after the first adds nothing
		return
	}
	B := r.g.j.cfg.L3.BlockTokens
	p.blocks, p.firstBlock, p.check = w.Tokens/B, c.startPos/B-w.Block, w.Check
}

// checkVotes: in a group that ran to its end, every check's span is its prompt's blocks up to the
// cap, and every prefetch read as many blocks as the existence-vote model gives from the check its
// reads name.
func (g *group) checkVotes() {
	if !g.j.cfg.L3.Enabled {
		return
	}
	for _, seq := range slices.Sorted(maps.Keys(g.votes)) {
		if v := g.votes[seq]; v.startedOn == len(g.ranks) {
			if !g.checkSpan(seq, v) {
				return
			}
			g.j.models.Spans++
		}
	}
	for _, seq := range slices.Sorted(maps.Keys(g.started)) {
		if !g.checkVote(seq, g.started[seq]) {
			return
		}
	}
}

// checkVote: prefetch seq read the MIN of its check's runs, shifted to its first block, or the
// backlog's room if less.
func (g *group) checkVote(seq uint64, p *prefetchStart) bool {
	geo := g.j.cfg.Geometry
	v := g.votes[p.check]
	if p.blocks < 0 || v == nil || len(v.runs) != len(g.ranks) || p.firstBlock < v.firstBlock {
		g.j.violate(
			g.ranks[0],
			fmt.Sprintf(
				"L3 prefetch %d (%d blocks from block %d) names existence check %d, which not every rank answered over a span from block %d or earlier",
				seq,
				p.blocks,
				p.firstBlock,
				p.check,
				p.firstBlock,
			),
		)
		return false
	}
	agreed, most := v.blocks, 0
	for _, run := range v.runs {
		agreed, most = min(agreed, run), max(most, run)
	}
	room := geo.Slots / prefetchBacklogShare / (g.j.cfg.L3.BlockTokens / geo.PageTokens)
	for _, s := range p.heldBy {
		room -= max(0, g.started[s].blocks)
	}
	shifted := agreed - (p.firstBlock - v.firstBlock)
	if want := min(shifted, room); p.blocks != want {
		g.j.violate(
			g.ranks[0],
			fmt.Sprintf(
				"L3 prefetch %d reads %d blocks from block %d; its readers' existence check %d over blocks %d..%d found runs %v (MIN %d, so %d from block %d), and the backlog left room for %d: the model says %d",
				seq,
				p.blocks,
				p.firstBlock,
				p.check,
				v.firstBlock,
				v.firstBlock+v.blocks-1,
				v.runs,
				agreed,
				shifted,
				p.firstBlock,
				room,
				want,
			),
		)
		return false
	}
	g.j.models.Prefetches++
	if most > agreed {
		g.j.models.Split++
	}
	return true
}
