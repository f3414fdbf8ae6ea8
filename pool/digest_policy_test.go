package pool

import (
	"slices"
	"testing"
)

// The digest and state hash property tests' cases for the policies' own state
// (digest_fields_test.go runs them with the others, over every policy's geometries).

func init() {
	for name, c := range map[string]fieldCase{
		// admit_seen: the content key a reservation names (its sighting, and so the verdict)
		"admission key": func(a, b *Allocator, src *splitmixSource) bool {
			if !a.geometry.Policy.Admits() {
				return false
			}
			return reserveBoth(a, b, src, func(op *operation) { op.key++ })
		},
		// SLRU: a touch of an object in probation promotes it; b's touch is of another object
		"SLRU promotion": func(a, b *Allocator, src *splitmixSource) bool {
			if a.geometry.Policy != PolicySLRU {
				return false
			}
			id, ok := liveID(a, src, func(r *object) bool { return r.segment == segProbation })
			other, ok2 := liveID(a, src, func(r *object) bool { return r.segment == segProtected })
			return ok && ok2 && a.Touch(id, 9) == nil && b.Touch(other, 9) == nil
		},
	} {
		callCases[name] = c
	}
	for name, c := range map[string]perturbCase{
		// SLRU: a protected object demoted on one twin alone (a touch it missed, a tie it broke
		// otherwise): a Reserve that evicts past probation's objects evicts differently
		"SLRU segment (a protected object demoted)": func(
			a, b *Allocator,
			src *splitmixSource,
		) (int, uint64) {
			if a.geometry.Policy != PolicySLRU {
				return 0, 0
			}
			// at old clocks, so that one demoted goes ahead of probation's objects
			touchAlike(a, b, src, 3)
			if len(b.protected.items) == 0 {
				return 0, 0
			}
			b.setSegment(b.protected.items[src.next(len(b.protected.items))], segProbation)
			probationPages := 0
			for _, index := range a.lru.items {
				probationPages += int(a.table.records[index].pages)
			}
			return a.freeSlots + probationPages + 1, 0
		},
		// admit_seen: a key forgotten by one twin (a sighting it missed): a Reserve of that content
		// that must evict is admitted by one twin and refused by the other
		"admit_seen key forgotten": func(a, b *Allocator, src *splitmixSource) (int, uint64) {
			bucket := slices.IndexFunc(b.seen, func(key uint64) bool { return key != 0 })
			if bucket < 0 || a.freeSlots >= a.geometry.Slots {
				return 0, 0
			}
			key := b.seen[bucket]
			b.seen[bucket], b.seenKeys = 0, b.seenKeys-1
			return a.freeSlots + 1, key
		},
	} {
		perturbCases[name] = c
	}
}

// touchAlike touches up to n evictable objects on both twins alike, at clocks 0 to n-1: random
// histories promote few objects to SLRU's protected segment, these calls promote some more.
func touchAlike(a, b *Allocator, src *splitmixSource, n int) {
	for k := range uint64(n) {
		id, ok := liveID(a, src, func(r *object) bool { return r.lruIndex != 0 })
		if ok && (a.Touch(id, k) != nil || b.Touch(id, k) != nil) {
			panic("touch of a live object failed")
		}
	}
}

// TestStateHashSeesThePolicyState: each part of a policy's own state changed alone (SLRU's
// protected heap, its page count and bound; admit_seen's table of keys and its count) changes
// StateHash, from random states of that policy's geometries: a rank whose policy state diverged
// differs in the state the simulator compares after every step, before any decision shows it.
func TestStateHashSeesThePolicyState(t *testing.T) {
	parts := map[string]struct {
		policy Policy
		change func(b *Allocator) bool // changes b alone, or reports false (no case)
	}{
		"SLRU protected heap order": {PolicySLRU, func(b *Allocator) bool {
			h := b.protected.items
			if len(h) < 2 {
				return false
			}
			h[0], h[1] = h[1], h[0]
			return true
		}},
		"SLRU protected pages": {PolicySLRU, func(b *Allocator) bool { b.protectedPages++; return true }},
		"SLRU protected bound": {PolicySLRU, func(b *Allocator) bool {
			b.protectedPagesMax--
			return true
		}},
		"admit_seen key": {PolicyAdmitSeen, func(b *Allocator) bool {
			b.seen[len(b.seen)/2] ^= 1 << 40
			return true
		}},
		"admit_seen count": {PolicyAdmitSeen, func(b *Allocator) bool { b.seenKeys++; return true }},
	}
	for name, part := range parts {
		seen := 0
		for i, g := range everyPolicyGeometry() {
			if g.Policy != part.policy {
				continue
			}
			for seed := range uint64(100) {
				a, b := twins(t, g, uint64(i)<<32|seed)
				touchAlike(a, b, &splitmixSource{state: seed}, 4) // more in protected, alike
				if a.StateHash() != b.StateHash() || !part.change(b) {
					continue
				}
				seen++
				if a.StateHash() == b.StateHash() {
					t.Fatalf("%s: geometry %d seed %d: changed alone, the state hash did not",
						name, i, seed)
				}
			}
		}
		if seen < 50 {
			t.Errorf("%s: only %d states offered a case", name, seen)
		}
	}
}
