package cache

import (
	"fmt"
	"strings"

	"github.com/cphicache/cphicache/pool"
)

// Deliberate bugs: each one is a mistake this cache could plausibly make, kept so that the
// simulator can show it catches them (hicache/sim's TestEveryDeliberateBugIsCaught). They exist
// only in a build with the simbugs tag: without it, Bugs.has is a constant false (bugs_off.go) and
// the compiler drops every branch that tests one.
type Bugs uint64

// Bug is one deliberate bug.
type Bug uint64

const (
	// commit on this rank's write frontier, not the group's MIN
	BugCommitOnLocalFrontier Bug = 1 << iota
	// a flush waits for its block writes on the writer rank only (the flush race)
	BugFlushWaitsOnlyOnWriter
	// unprotect a block's L2 objects before the storage frontier passes its write
	BugUnprotectBeforeStored
	// use every prefetched block even when the group agreed a read failed
	BugAttachFailedPrefetch
	// the allocator's reset leaves the free bitmap as it was
	BugResetKeepsFreeBitmap
	// CP rank 1 breaks L1 eviction ties by the higher node id
	BugTieBreakOnRank
	BugAuditSkipsRank // the commit audit skips the last CP rank's parts
	// a committed object is not held until the next consensus for its audit
	BugNoAuditHold
	// prefetch this rank's own count of L3 blocks, not the group's MIN
	BugLocalPrefetchCount
	// a load-back does not protect its L2 object from eviction
	BugNoLoadProtect
	// write_back's near-eviction block writes do not protect their objects
	BugNoWriteBackProtect
	BugResetKeepsDevicePages // a flush's reset leaves the device pages taken
	// the placement assert is off (digest and objects): to show what the audit catches alone
	BugAssertOff
	// on a group over several nodes, only its first node audits committed objects
	BugAuditOneNode
	// on a group over several nodes, only its first node reads an L3 prefetch's part-files
	BugL3ReadOneNode
	// a load-back now and then is released without its byte-for-byte check
	BugSkipLoadVerify
	// the group agrees the MAX of the ranks' L3 existence counts, not the MIN
	BugExistenceVoteMax
	// the L3 write policy schedules a block again while its write is in flight
	BugL3WriteTwice
	// a prefetched node's later load-backs (from the L2) are counted L3 hits too
	BugL3HitCountedTwice
	// a prefetch of more than one block reads one fewer than every reader found
	BugPrefetchOneShort
	// a prefetched node's first load-back (the L3's bytes) is counted an L2 hit
	BugL3HitCountedAsL2
	// an existence check of more than one block stops one short of its prompt's end or the cap
	BugCheckSpanShort
	// write_back also writes a committed object's blocks at once, as write_through does
	BugWriteBackAtCommit
	// write_back's near-eviction pass writes only the oldest object's blocks, not all up to the
	// watermark
	BugWriteBackOldestOnly
	// a request with exactly --l3-prefetch-threshold tokens not cached prefetches nothing
	BugPrefetchThresholdOffByOne
	// a prefetch the backlog's room would cut short is not started at all
	BugPrefetchAllOrNothing
	// the prefetch decision counts one page past the tree's usable KV as served
	BugServedPrefixPageLong
	// a prefetch reservation that would have to evict is refused as a miss
	BugPrefetchReserveNoEvict
	// the tree's served prefix runs on through hollow nodes (KV in neither L1 nor L2)
	BugServedPrefixHollow
	// the prefetch decision counts the tree's last usable page as not served
	BugServedPrefixPageShort
	// write_back's pass writes no block that spans two L2 objects
	BugWriteBackOneObject
	// the placement digest leaves each extent's first slot out (pool's BreakDigestForTest)
	BugDigestMissesStart
	// CP rank 1 misses the L2 touch of a hit (every --l2-policy: LRU's clock, SLRU's promotion)
	BugL2TouchMissedOnRank
	// CP rank 1's SLRU demotes the protected object of the least clock with the highest id, a
	// tie broken by a rank's own order (pool's PolicyBugTieOnRank)
	BugSLRUTieOnRank
	// CP rank 1's SLRU touch does not promote (pool's PolicyBugPromotionMissed)
	BugSLRUPromotionMissed
	// CP rank 0 records an admit_seen sighting of each request's first page as it serves it: a
	// count kept by the rank that reads the workload alone
	BugAdmitSeenOnRoot
	// The serving clock's (ModeServing jobs of the simulator; hicache/sim's clock*.go):
	// serving's Hit.Tokens leaves a request's L1 hit out of its cached tokens, so it is computed
	// again: a hit that does not lower the charge (serving's BreakHitChargeForTest)
	BugHitChargeIgnoresL1
	// a step's L3 hits are charged their load-backs, not their reads (serving's
	// BreakL3ReadChargeForTest)
	BugL3ReadFree
	// the ideal is the run's own (measured) timings, not a virtual replay of its record: the
	// simulator's serving clock, where the runner's replayIdeal would make the mistake
	BugIdealFromMeasured
	// the ideal forms its own steps from the record's arrivals (serving.VirtualReplay, a sweep's
	// clock), not the run's steps again: the simulator's serving clock, where the runner's
	// replayIdeal would make the mistake
	BugIdealFormsOwnSteps
	// every CP rank forms its own batch from its own queue and clock rather than decoding CP rank
	// 0's: the simulator's step broadcast, where the runner's nextStep would make the mistake
	BugBatchFromOwnQueue
	bugEnd
)

var bugNames = map[Bug]string{
	BugCommitOnLocalFrontier: "commit_on_local_frontier", BugFlushWaitsOnlyOnWriter: "flush_waits_only_on_writer",
	BugUnprotectBeforeStored: "unprotect_before_stored", BugAttachFailedPrefetch: "attach_failed_prefetch",
	BugResetKeepsFreeBitmap: "reset_keeps_free_bitmap", BugTieBreakOnRank: "tie_break_on_rank",
	BugAuditSkipsRank: "audit_skips_rank", BugNoAuditHold: "no_audit_hold", BugLocalPrefetchCount: "local_prefetch_count",
	BugNoLoadProtect: "no_load_protect", BugNoWriteBackProtect: "no_write_back_protect",
	BugResetKeepsDevicePages: "reset_keeps_device_pages", BugAssertOff: "assert_off", BugAuditOneNode: "audit_one_node",
	BugL3ReadOneNode: "l3_read_one_node", BugSkipLoadVerify: "skip_load_verify",
	BugExistenceVoteMax: "existence_vote_max", BugL3WriteTwice: "l3_write_twice",
	BugL3HitCountedTwice: "l3_hit_counted_twice", BugPrefetchOneShort: "prefetch_one_short",
	BugL3HitCountedAsL2: "l3_hit_counted_as_l2", BugCheckSpanShort: "check_span_short",
	BugWriteBackAtCommit: "write_back_at_commit", BugWriteBackOldestOnly: "write_back_oldest_only",
	BugPrefetchThresholdOffByOne: "prefetch_threshold_off_by_one", BugPrefetchAllOrNothing: "prefetch_all_or_nothing",
	BugServedPrefixPageLong: "served_prefix_page_long", BugPrefetchReserveNoEvict: "prefetch_reserve_no_evict",
	BugServedPrefixHollow: "served_prefix_hollow", BugServedPrefixPageShort: "served_prefix_page_short",
	BugWriteBackOneObject: "write_back_one_object", BugDigestMissesStart: "digest_misses_start",
	BugL2TouchMissedOnRank: "l2_touch_missed_on_rank", BugSLRUTieOnRank: "slru_tie_on_rank",
	BugSLRUPromotionMissed: "slru_promotion_missed", BugAdmitSeenOnRoot: "admit_seen_on_root",
	BugHitChargeIgnoresL1: "hit_charge_ignores_l1", BugL3ReadFree: "l3_read_charged_nothing",
	BugIdealFromMeasured: "ideal_from_measured", BugIdealFormsOwnSteps: "ideal_forms_own_steps",
	BugBatchFromOwnQueue: "batch_from_own_queue",
}

func (b Bug) String() string { return bugNames[b] }

// AllBugs lists every deliberate bug, in a fixed order.
func AllBugs() []Bug {
	var all []Bug
	for b := Bug(1); b < bugEnd; b <<= 1 {
		all = append(all, b)
	}
	return all
}

// ParseBug reads a bug's name.
func ParseBug(name string) (Bug, error) {
	for b, n := range bugNames {
		if n == name {
			return b, nil
		}
	}
	var names []string
	for _, b := range AllBugs() {
		names = append(names, b.String())
	}
	return 0, fmt.Errorf("%q is not a deliberate bug: one of %s", name, strings.Join(names, ", "))
}

// With returns b with bug added.
func (b Bugs) With(bug Bug) Bugs { return b | Bugs(bug) }

// Has says whether b holds bug (whether or not this build carries the bugs' code).
func (b Bugs) Has(bug Bug) bool { return b&Bugs(bug) != 0 }

// breakPolicy installs the policies' deliberate bugs that live in pool in CP rank 1's allocator
// (pool's BreakPolicyForTest; nothing outside a simbugs build).
func (c *Core) breakPolicy() {
	if c.cfg.CPRank != 1 {
		return
	}
	for bug, policyBug := range map[Bug]pool.PolicyBug{
		BugSLRUTieOnRank:       pool.PolicyBugTieOnRank,
		BugSLRUPromotionMissed: pool.PolicyBugPromotionMissed,
	} {
		if c.cfg.Testing.Bugs.has(bug) {
			c.alloc.BreakPolicyForTest(policyBug)
		}
	}
}
