package pool

import (
	"fmt"
	"strings"
)

// Policy is the shared pool's eviction and admission policy (--l2-policy). Every policy is a pure
// function of the replicated state: its order is the allocator's (clock, id) order, its counters
// and marks live in the allocator's tables, where StateHash sees them, and its decisions (which
// object goes, whether one comes in) chain into the digest. No policy reads a clock, a rank or
// anything that one rank alone sees (doc.go, "Policies").
type Policy uint8

const (
	// PolicyLRU evicts committed, unreferenced objects least recently used first, (clock, id)
	// ascending: the allocator's order since its first version, and the default.
	PolicyLRU Policy = iota
	// PolicySLRU is segmented LRU (Karedla, Love and Wherry, "Caching strategies to improve disk
	// system performance", IEEE Computer 27(3), 1994; vLLM's CPU offloading, vllm-project/vllm
	// #38984; one of SGLang's radix cache eviction policies): an object enters a probation segment
	// and a touch promotes it to a protected segment, which holds at most slruProtectedPercent of
	// the slots; eviction takes probation's least recently used first, and protected's only when
	// probation is empty. A promotion that overfills protected demotes protected's least recently
	// used evictable objects to probation, where they keep their clock (the classic design moves
	// them to probation's most recent end; keeping the clock needs no second key and orders
	// probation by real recency).
	PolicySLRU
	// PolicyAdmitSeen admits an object that would have to evict others only when its content was
	// seen before: the caller names the content by a key (ReserveAdmitted), and a direct-mapped
	// table of the last key seen in each of its buckets remembers the sightings. It is the
	// doorkeeper of TinyLFU (Einziger, Friedman and Manes, "TinyLFU: a highly efficient cache
	// admission policy", ACM Transactions on Storage 13(4), 2017) with a threshold of one earlier
	// sighting, as vLLM's store_threshold (vllm-project/vllm #35342) and NVIDIA Dynamo KVBM's
	// frequency filters (ai-dynamo/dynamo #8826 Presence/PresenceLfu, #10062) gate offloads. An
	// object that fits in the free slots is admitted whatever its key: a refusal that frees
	// nothing saves nothing. Eviction is LRU.
	PolicyAdmitSeen
	policyKinds
)

var policyNames = [policyKinds]string{
	PolicyLRU:       "lru",
	PolicySLRU:      "slru",
	PolicyAdmitSeen: "admit_seen",
}

// String returns the flag spelling of the policy.
func (p Policy) String() string {
	if p < policyKinds {
		return policyNames[p]
	}
	return fmt.Sprintf("Policy(%d)", uint8(p))
}

// PolicyNames lists the flag spellings of every policy, the default first.
func PolicyNames() []string { return policyNames[:] }

// ParsePolicy parses the flag spelling of a policy.
func ParsePolicy(s string) (Policy, error) {
	for i, name := range policyNames {
		if s == name {
			return Policy(i), nil
		}
	}
	return 0, fmt.Errorf(
		"unknown L2 policy %q: allowed values are %s",
		s,
		strings.Join(policyNames[:], ", "),
	)
}

// Admits says whether the policy decides admissions, and so wants ReserveAdmitted's key.
func (p Policy) Admits() bool { return p == PolicyAdmitSeen }

// slruProtectedPercent is SLRU's protected segment's share of the slots: 80%, as Caffeine's
// segmented main space and the SLRU of vLLM's offloading (#38984) keep it, so that objects seen
// once hold a fifth of the pool at least whenever protected is full.
const slruProtectedPercent = 80

// protectedPagesMax is the most pages SLRU's protected segment holds among the evictable objects.
func (g Geometry) protectedPagesMax() int { return g.Slots * slruProtectedPercent / 100 }

// seenBuckets is the size of admit_seen's table of keys: a power of two of at least MaxObjects, so
// that the table remembers about as many sightings as the pool holds objects.
func (g Geometry) seenBuckets() int {
	if !g.Policy.Admits() {
		return 0
	}
	n := 1
	for n < g.maxObjects() {
		n *= 2
	}
	return n
}

// Segments of SLRU; LRU and admit_seen keep every record in segProbation.
const (
	segProbation uint8 = iota
	segProtected
)

// heapOf is the heap that holds (or would hold) record r while it is evictable: its segment's.
func (a *Allocator) heapOf(r *object) *lruHeap {
	if r.segment == segProtected {
		return &a.protected
	}
	return &a.lru
}

// evictableObjects counts the objects in both heaps.
func (a *Allocator) evictableObjects() int { return len(a.lru.items) + len(a.protected.items) }

// nextVictim is the record Reserve evicts next: probation's (every evictable object's, outside
// SLRU) least recently used, else protected's. There must be one.
func (a *Allocator) nextVictim() uint32 {
	if len(a.lru.items) > 0 {
		return a.lru.items[0]
	}
	return a.protected.items[0]
}

// pushEvictable puts a record that became evictable into its segment's heap.
func (a *Allocator) pushEvictable(index uint32) {
	r := &a.table.records[index]
	a.heapOf(r).push(a.table.records, index)
	a.lruPages += int(r.pages)
}

// removeEvictable takes an evictable record out of its segment's heap.
func (a *Allocator) removeEvictable(index uint32) {
	r := &a.table.records[index]
	a.heapOf(r).remove(a.table.records, index)
	a.lruPages -= int(r.pages)
}

// setSegment moves a live record to segment seg, from one heap to the other when it is evictable,
// keeping protectedPages the pages of every live record in the protected segment.
func (a *Allocator) setSegment(index uint32, seg uint8) {
	r := &a.table.records[index]
	inHeap := r.lruIndex != 0
	if inHeap {
		a.removeEvictable(index)
	}
	if seg == segProtected {
		a.protectedPages += int(r.pages)
	} else {
		a.protectedPages -= int(r.pages)
	}
	r.segment = seg
	if inHeap {
		a.pushEvictable(index)
	}
	if a.protectedPages < 0 || (a.protectedPages > 0 && a.geometry.Policy != PolicySLRU) {
		panic(a.broken("slru: protected pages %d after moving object %d to segment %d under %s",
			a.protectedPages, r.id, seg, a.geometry.Policy))
	}
}

// promote moves a touched SLRU record from probation to protected, then demotes while protected
// is over its bound. The bound counts every object of the protected segment, evictable or not
// (uncommitted, or being loaded), and is enforced at each promotion over the objects it can
// demote, the evictable ones, least recently used first: so only a touch ever moves an object
// between segments, and a commit or the end of a load-back, whose order a rank's copies decide
// locally until the consensus agrees it, moves none.
func (a *Allocator) promote(index uint32) {
	a.setSegment(index, segProtected)
	// Bounded by protected's evictable objects: each turn takes one out of its heap.
	for a.protectedPages > a.protectedPagesMax && len(a.protected.items) > 0 {
		victim := a.protected.items[0]
		if a.hasPolicyBug(PolicyBugTieOnRank) { // simbugs only: ties go to the higher id
			victim = a.protectedTieHigh()
		}
		a.setSegment(victim, segProbation)
	}
}

// protectedTieHigh is the deliberate bug's choice of the object to demote (simbugs only): among the
// protected objects of the least clock, the highest id, as a tie broken by a rank's own order.
func (a *Allocator) protectedTieHigh() uint32 {
	var scratch [64]uint32
	walk := newLRUWalk(&a.protected, scratch[:])
	walk, best, _ := walk.next(&a.protected, a.table.records)
	for {
		next, index, ok := walk.next(&a.protected, a.table.records)
		if !ok || a.table.records[index].clock != a.table.records[best].clock {
			return best
		}
		walk, best = next, index
	}
}

// seenBucket is the bucket of admit_seen's table that remembers key.
func (a *Allocator) seenBucket(key uint64) int { return int(Mix64(key) & uint64(len(a.seen)-1)) }

// seenEntry is how the table stores key: 0 marks an empty bucket, so key 0 is stored as 1 (a
// sighting of one is then a sighting of the other, a harmless collision like any other).
func seenEntry(key uint64) uint64 { return max(key, 1) }

// sight records a sighting of key in admit_seen's table and says whether the table held it already.
func (a *Allocator) sight(key uint64) bool {
	bucket := a.seenBucket(key)
	seen := a.seen[bucket] == seenEntry(key)
	if !seen {
		if a.seen[bucket] == 0 {
			a.seenKeys++
		}
		a.seen[bucket] = seenEntry(key)
	}
	return seen
}

// NoteSeenForTest is FOR THE SIMULATOR'S DELIBERATE BUGS ONLY: a sighting of key recorded outside
// any reservation, with no record in the digest (what a rank that counts its own events would do).
// It does nothing outside admit_seen.
func (a *Allocator) NoteSeenForTest(key uint64) {
	if a.geometry.Policy.Admits() {
		a.sight(key)
	}
}

// ReserveAdmitted is Reserve under the policy's admission: the caller names the object's content
// by key (equal content, equal key, on every rank). Under admit_seen it records the sighting and,
// when the object does not fit in the free slots and the key was not seen before, places nothing
// and returns Refused (Evicted empty); the sighting and the verdict chain into the digest. Under
// the other policies it is Reserve, and the key is not used.
func (a *Allocator) ReserveAdmitted(
	id ObjectID,
	pages int,
	seq, clock, key uint64,
) (Outcome, error) {
	if !a.geometry.Policy.Admits() {
		return a.Reserve(id, pages, seq, clock)
	}
	if err := a.checkReserve(id, pages); err != nil {
		return Miss, err
	}
	seen := a.sight(key)
	admitted := seen || a.fits(pages)
	a.digest = digestAdd(a.digest, tagAdmit, key, boolWord(admitted))
	if !admitted {
		a.evicted = a.evicted[:0]
		a.checkExpensive("refuse")
		return Refused, nil
	}
	return a.Reserve(id, pages, seq, clock)
}

func boolWord(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// PolicyBug names a deliberate bug of a policy that BreakPolicyForTest installs (simbugs builds).
type PolicyBug uint8

const (
	// PolicyBugTieOnRank: SLRU's demotion breaks a tie of clocks by the higher id, a rank's own
	// order rather than the replicated one.
	PolicyBugTieOnRank PolicyBug = iota + 1
	// PolicyBugPromotionMissed: SLRU's touch forgets to promote, a touch one rank missed.
	PolicyBugPromotionMissed
)
