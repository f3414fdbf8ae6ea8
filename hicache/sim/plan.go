package sim

import (
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3block"
)

// The prefetch-decision model: at each serving step, which requests must start a prefetch and which
// must not (the existence-vote model, votes.go, checks only those that started). From the core's
// rule (DESIGN.md, "The L3 tier"): a request is a candidate when at least the threshold's tokens of
// its prompt's whole pages are not served by the tree and a whole block is left; its count is the
// MIN of its check's runs (the simulator's own answers) shifted to its first block, at most its
// prompt's blocks and the cap; a count of 0 starts nothing; a request whose first block's key an
// earlier one of the step started shares that prefetch; else one starts with as many blocks as the
// room allows (none while backed off after an agreed failure, or while one is unresolved before the
// L3 is proven or after a failure; else an eighth of the L2 less the unresolved blocks). A request
// prefetching nothing where the rule says one must start (a threshold compare off by one, a
// back-off too long), or one starting where it must not, is a decision every rank agrees and no
// byte contradicts. A reservation the L2 refused (a miss) must be one it had no room for: before
// each prefetch reservation the core shows the L2 (cache.L2View), and its free slots and the pages
// of every object it could evict must fall short of the reservation (a refusal of one that would
// have had to evict, prefetch_reserve_no_evict, leaves the L3's hits unread). What it cannot see:
// the tree, so the prefix the tree served (PrefetchPlan.Usable) is the core's, bounded on both
// sides by the served-prefix model (served.go).

// backOffModel is the prefetch back-off from the agreed outcomes (CP rank 0's notices): consecutive
// failed prefetches, the step before which none starts, and whether one has been read whole.
type backOffModel struct {
	failStreak int
	resumeStep int64
	proven     bool
}

// resolved notes prefetch seq's agreed outcome at step: a failed read backs off 2, 4, ... steps, at
// most 64.
func (b *backOffModel) resolved(failed bool, step int64) {
	if !failed {
		b.failStreak, b.proven = 0, true
		return
	}
	b.failStreak++
	b.resumeStep = step + min(int64(1)<<min(b.failStreak, 30), 64)
}

// room is how many blocks a new prefetch may read at step with the prefetches held unresolved.
func (g *group) room(step int64, held []uint64) int {
	b := &g.backOff
	if step < b.resumeStep || ((b.failStreak > 0 || !b.proven) && len(held) > 0) {
		return 0
	}
	geo := g.j.cfg.Geometry
	room := geo.Slots / prefetchBacklogShare / (g.j.cfg.L3.BlockTokens / geo.PageTokens)
	for _, s := range held {
		room -= g.planBlocks[s]
	}
	return max(0, room)
}

// reservation is one prefetch reservation of a step, as the L2 stood before it: its pages, and the
// free slots and pages of evictable objects it had.
type reservation struct{ pages, room int }

// reserving notes, on CP rank 0, the L2's room for a prefetch reservation of pages pages: the free
// slots, and the pages of the evictable objects the allocator would evict first (all of them, if
// they do not make room). The allocator refuses exactly when these fall short: its object table, of
// one entry a slot, is full only when no slot is free.
func (r *rank) reserving(pages int, v cache.L2View) {
	room := v.FreeSlots()
	for _, obj := range v.OldestEvictable(pages - room) {
		room += len(v.Slots(obj))
	}
	r.g.reservations = append(r.g.reservations, reservation{pages: pages, room: room})
}

// planned checks a step's prefetch decisions on CP rank 0 (the group's are replicated).
func (r *rank) planned(step int64, plans []cache.PrefetchPlan) {
	g := r.g
	if !g.checkServed(r, step, plans) {
		return
	}
	held := slices.DeleteFunc(slices.Clone(g.unresolved), func(s uint64) bool {
		return slices.ContainsFunc(
			plans,
			func(p cache.PrefetchPlan) bool { return p.Prefetch == s },
		)
	})
	if g.planBlocks == nil {
		g.planBlocks = map[uint64]int{}
	}
	for _, p := range plans {
		if p.Prefetch != 0 {
			g.planBlocks[p.Prefetch] = p.Blocks
		}
	}
	startedBy := map[uint64]uint64{} // the step's prefetches, by their first block's key
	for i := range plans {
		if !g.checkPlan(r, step, &plans[i], held, startedBy) {
			return
		}
		if p := plans[i].Prefetch; p != 0 && !slices.Contains(held, p) {
			held = append(held, p)
		}
	}
}

// checkPlan checks one request's decision against the model.
func (g *group) checkPlan(
	r *rank,
	step int64,
	p *cache.PrefetchPlan,
	held []uint64,
	startedBy map[uint64]uint64,
) bool {
	cfg := &g.j.cfg
	B, pt := cfg.L3.BlockTokens, cfg.Geometry.PageTokens
	ids := p.Request.InputIDs[:len(p.Request.InputIDs)/pt*pt]
	candidate := len(ids)-p.Usable >= cfg.L3.PrefetchThreshold && p.Usable/B < len(ids)/B
	if candidate != (p.Check != 0) {
		g.violateCandidacy(r, p, len(ids), candidate)
		return false
	}
	want := 0
	if candidate {
		if want = g.plannedCount(p, len(ids)/B); want < 0 {
			g.violateUncounted(r, step, p)
			return false
		}
	}
	key := uint64(0)
	for k := 0; want > 0 && k <= p.Usable/B; k++ {
		key = l3block.ChainKey(key, ids[k*B:(k+1)*B])
	}
	shared, isShared := startedBy[key]
	switch {
	case want == 0 && p.Prefetch == 0:
		return true
	case want > 0 && isShared:
		want = g.started[shared].blocks
	case want > 0:
		heldThen := held
		if s := g.started[p.Prefetch]; p.Prefetch != 0 && s != nil {
			heldThen = s.heldBy
		}
		want = min(want, g.room(step, heldThen))
		if want > 0 &&
			// else no reservation was due: the comparison below names it
			(p.Missed || p.Prefetch != 0) {
			if !g.reserved(r, step, p, want) {
				return false
			}
		}
		if p.Missed && want > 0 && p.Prefetch == 0 {
			g.j.models.PlanMisses++ // a reservation the L2 refused, for want of room (reserved)
			return true
		}
	}
	if p.Missed || (want == 0) != (p.Prefetch == 0) || want > 0 && p.Blocks != want ||
		isShared && p.Prefetch != shared {
		g.violateDecision(r, step, p, len(ids), want, shared, isShared)
		return false
	}
	if want > 0 && !isShared {
		startedBy[key] = p.Prefetch
	}
	if want > 0 {
		g.j.models.PlanWaits++
	}
	g.j.models.Plans++
	return true
}

// violateCandidacy reports a request of tokens whole-page tokens whose candidacy for a prefetch
// the core decided against the model's (candidate): its threshold compare is off.
func (g *group) violateCandidacy(r *rank, p *cache.PrefetchPlan, tokens int, candidate bool) {
	cfg := &g.j.cfg
	g.j.violate(
		r,
		fmt.Sprintf(
			"L3 prefetch decision: a request with %d of its %d tokens served by the tree (threshold %d, %d-token blocks) is a candidate: the model says %v, the core %v",
			p.Usable,
			tokens,
			cfg.L3.PrefetchThreshold,
			cfg.L3.BlockTokens,
			candidate,
			p.Check != 0,
		),
	)
}

// violateUncounted reports a candidate at step whose count the core took from a check that not
// every rank answered over its span, which the model cannot count from.
func (g *group) violateUncounted(r *rank, step int64, p *cache.PrefetchPlan) {
	g.j.violate(
		r,
		fmt.Sprintf(
			"L3 prefetch decision at step %d: a request from token %d counts check %d, which not every rank answered over a span from block %d or earlier",
			step,
			p.Usable,
			p.Check,
			p.Usable/g.j.cfg.L3.BlockTokens,
		),
	)
}

// violateDecision reports a request of tokens whole-page tokens at step whose prefetch the core
// decided otherwise than the model's want blocks (shared with prefetch shared when isShared).
func (g *group) violateDecision(
	r *rank,
	step int64,
	p *cache.PrefetchPlan,
	tokens, want int,
	shared uint64,
	isShared bool,
) {
	g.j.violate(
		r,
		fmt.Sprintf(
			"L3 prefetch decision at step %d: a request from token %d of %d (check %d) waits for prefetch %d of %d blocks (a reservation missed: %v); the model says %d blocks (shared with prefetch %d: %v), from its check's runs, the cap and the room",
			step,
			p.Usable,
			tokens,
			p.Check,
			p.Prefetch,
			p.Blocks,
			p.Missed,
			want,
			shared,
			isShared,
		),
	)
}

// plannedCount is a candidate's count before the room: the MIN of its check's runs shifted to its
// first block, at most its prompt's blocks from there and the prefetch cap.
func (g *group) plannedCount(p *cache.PrefetchPlan, blocks int) int {
	geo := g.j.cfg.Geometry
	B := g.j.cfg.L3.BlockTokens
	v, first := g.votes[p.Check], p.Usable/B
	if v == nil || len(v.runs) != len(g.ranks) || first < v.firstBlock {
		return -1 // no answer to count from: checkPlan's comparison names it
	}
	agreed := v.blocks
	for _, run := range v.runs {
		agreed = min(agreed, run)
	}
	limit := min(prefetchBlocksMax, geo.Slots/2/(B/geo.PageTokens))
	return max(0, min(agreed-(first-v.firstBlock), blocks-first, limit))
}

// reserved takes the reservation a request's new prefetch made, or the L2 refused: a refusal must
// leave the L2 short of room for the model's blocks (a started prefetch's blocks are the
// comparison's in checkPlan).
func (g *group) reserved(r *rank, step int64, p *cache.PrefetchPlan, want int) bool {
	blockPages := g.j.cfg.L3.BlockTokens / g.j.cfg.Geometry.PageTokens
	if len(g.reservations) == 0 {
		g.j.violate(
			r,
			fmt.Sprintf(
				"L3 prefetch decision at step %d: a request from token %d waits for prefetch %d (a reservation missed: %v), and no reservation was made for it",
				step,
				p.Usable,
				p.Prefetch,
				p.Missed,
			),
		)
		return false
	}
	res := g.reservations[0]
	g.reservations = g.reservations[1:]
	if p.Missed && res.room >= want*blockPages {
		g.j.violate(
			r,
			fmt.Sprintf(
				"L3 prefetch decision at step %d: a request from token %d had its reservation of %d L2 pages refused with %d free or evictable: room for the model's %d blocks of %d pages",
				step,
				p.Usable,
				res.pages,
				res.room,
				want,
				blockPages,
			),
		)
		return false
	}
	return true
}
