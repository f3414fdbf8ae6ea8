package cache

import (
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// Testing is everything the tests and the simulator attach to a core, in one place, so that the
// rest of Config reads as a run's configuration: a run (the runner's coreConfig) leaves it zero,
// and then none of it costs more than a test of a nil or false field. The deliberate bugs are
// compiled out besides (bugs_off.go).
type Testing struct {
	// CheckInvariants checks the step invariants after every step (checkStepInvariants: O(tree +
	// device pages)), the expensive half of the assertion policy (DESIGN.md, "Asserts"): the cheap
	// half is always on.
	CheckInvariants bool
	// CheckEvictions compares every L1 eviction with the walk-and-sort eviction the queue replaced
	// (below).
	CheckEvictions bool
	// Served, when set, is told what each request's serve decided, in tokens (the simulator's
	// sequential model).
	Served func(o Outcome)
	// NearEviction, when set, is shown the L2 at every consensus with an L3, after its commits and
	// before write_back's near-eviction pass (the simulator's write_back model: which objects'
	// blocks must be written).
	NearEviction func(v L2View)
	// PrefetchPlanned, when set, is told each serving step's prefetch decision, request by request
	// (the simulator's prefetch model: what must start, and what must not).
	PrefetchPlanned func(step int64, plans []PrefetchPlan)
	// PrefetchPlanning, when set, is shown the L2 and the device pool as a serving step's prefetch
	// decision begins (after the requests that waited for a prefetch were served, before any
	// reservation): the memory the prefixes the tree serves then must lie in (the simulator's
	// served-prefix model).
	PrefetchPlanning func(v L2View)
	// Serving, when set, is told which request a serve begins (the simulator's served-prefix model
	// names the pages each Fill of the serve writes by the prompt's path to them).
	Serving func(req *workload.Request)
	// PrefetchReserving, when set, is shown the L2 before each prefetch reservation of pages pages
	// (the simulator's prefetch model: a reservation refused while the L2 had room is wrong).
	PrefetchReserving func(pages int, v L2View)
	// PerturbStateAtStep, when not 0, leaks this rank's lowest free L2 slot after that step's
	// consensus with no record in the digest (pool's PerturbStateForTest): unlike PerturbAtStep's
	// Perturb, only the placements that follow can show it, so it tests that the digest covers them
	// (hicache/sim's recordless divergence jobs).
	PerturbStateAtStep int64
	// Bugs are the deliberate bugs to carry out (bugs.go): only in a build with the simbugs tag.
	Bugs Bugs
}

// The eviction queue against its model: the walk-and-sort eviction it replaced. With
// Testing.CheckEvictions the core compares every L1 eviction with it, choice by choice (evictL1).

// evictionCheck checks the nodes one L1 eviction chose, in order, and how many pages it freed of
// how many it needed.
type evictionCheck func(chosen []*treeNode, freedPages, needPages int) error

// naiveEvictionOrder is the model: every node of the tree evictable now, least recently used first,
// ties by id.
func naiveEvictionOrder(c *Core) []*treeNode {
	var candidates []*treeNode
	c.tree.forEach(func(n *treeNode) {
		if c.evictableFromL1(n) {
			candidates = append(candidates, n)
		}
	})
	slices.SortFunc(candidates, func(a, b *treeNode) int {
		if older(a, b) {
			return -1
		}
		return 1
	})
	return candidates
}

// walkEvictionModel takes the model's order when an eviction begins and checks the eviction's
// choices against it when it ends.
func walkEvictionModel(c *Core) evictionCheck {
	model := naiveEvictionOrder(c)
	return func(chosen []*treeNode, freedPages, needPages int) error {
		return compareEviction(model, chosen, freedPages, needPages)
	}
}

// compareEviction: the walk-and-sort eviction took its candidates in order until enough pages were
// freed or none were left, so the choices must be a prefix of the model's order that stops only for
// one of those reasons.
func compareEviction(model, chosen []*treeNode, freedPages, needPages int) error {
	for i, n := range chosen {
		if i >= len(model) {
			return fmt.Errorf(
				"L1 eviction choice %d is node %d; the model had only %d candidates",
				i,
				n.id,
				len(model),
			)
		}
		if model[i] != n {
			return fmt.Errorf(
				"L1 eviction choice %d is node %d (last access %d), the model's is node %d (last access %d)",
				i,
				n.id,
				n.lastAccess,
				model[i].id,
				model[i].lastAccess,
			)
		}
	}
	if len(chosen) < len(model) && freedPages < needPages {
		return fmt.Errorf(
			"L1 eviction stopped after %d of the model's %d candidates with %d of %d pages freed",
			len(chosen),
			len(model),
			freedPages,
			needPages,
		)
	}
	return nil
}

// L2View is what the simulator's models read of the memory the core allocates
// (Testing.NearEviction, PrefetchPlanning, PrefetchReserving): the allocator's free slots, its
// eviction order, an object's slots and whether it is committed, and the device pages taken, which
// no Env call shows (reservations, evictions and pages given back are the allocators', not work
// handed to the Env). It is live: read it inside the call.
type L2View struct{ c *Core }

// Object says whether L2 object obj is live, and committed.
func (v L2View) Object(obj uint64) (live, committed bool) {
	info, ok := v.c.alloc.Lookup(pool.ObjectID(obj))
	return ok, ok && info.Committed
}

// DeviceTaken lists this rank's device pages taken now (by a node, or by a copy into or out of
// them).
func (v L2View) DeviceTaken() []int32 { return v.c.dev.taken() }

// FreeSlots is the L2's free slots now.
func (v L2View) FreeSlots() int { return v.c.alloc.FreeSlots() }

// OldestEvictable is the shortest prefix of the L2's eviction order holding pages pages
// (pool.OldestEvictable).
func (v L2View) OldestEvictable(pages int) []uint64 {
	var ids []uint64
	for _, obj := range v.c.alloc.OldestEvictable(pages, nil) {
		ids = append(ids, uint64(obj))
	}
	return ids
}

// Slots are the slab slots of L2 object obj, page by page (none when it is gone).
func (v L2View) Slots(obj uint64) []SlabSlot {
	extents, _ := v.c.alloc.Extents(pool.ObjectID(obj))
	pages := 0
	for _, e := range extents {
		pages += int(e.Slots)
	}
	slots, _ := v.c.slotsOf(pool.ObjectID(obj), 0, pages)
	return slots
}

// PrefetchPlan is one request's prefetch decision at a serving step (Testing.PrefetchPlanned): what
// the tree served of its prompt then (the tree is not the Env's to see), the existence check
// counted (0: no candidate), and the prefetch it waits for (0: none), started for it or shared with
// an earlier request of the step.
type PrefetchPlan struct {
	Request *workload.Request
	Usable  int // tokens of its prompt's whole pages the tree served when the step began
	// the existence check whose agreed answer counted its blocks; 0 when it is no candidate
	Check    uint64
	Prefetch uint64 // the prefetch it waits for; 0 none
	Blocks   int    // that prefetch's blocks
	Missed   bool   // the L2 refused the reservation of a prefetch it would have started
}

// prefetchPlans lists a step's decisions in batch order.
func prefetchPlans(
	batch []workload.Event,
	cands []prefetchCandidate,
	waiting []deferredRequest,
) []PrefetchPlan {
	plans := make([]PrefetchPlan, len(batch))
	for i := range batch {
		plans[i] = PrefetchPlan{
			Request: &batch[i].Request,
			Usable:  cands[i].usable,
			Check:   cands[i].check,
			Missed:  cands[i].missed,
		}
	}
	for _, d := range waiting {
		for i := range plans {
			if plans[i].Request == d.req {
				plans[i].Prefetch, plans[i].Blocks = d.prefetch.seq, len(d.prefetch.keys)
			}
		}
	}
	return plans
}

// PlacementsHash hashes every live L2 object's placement (its id and extents), in id order: the
// simulator's oracle for whether a group's ranks placed what they hold alike, which a recordless
// divergence the group's checks did not catch must have left so.
func (c *Core) PlacementsHash() uint64 {
	ids := make([]pool.ObjectID, 0, len(c.objectNodes))
	for id := range c.objectNodes {
		ids = append(ids, id)
	}
	slices.Sort(ids) // the map only gathers the ids
	h := uint64(len(ids))
	for _, id := range ids {
		h = pool.Mix64(h ^ c.alloc.PlacementHash(id))
	}
	return h
}
