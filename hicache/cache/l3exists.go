package cache

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/workload"
)

// Existence checks ahead of need. A request's L3 blocks are looked for on the Env's I/O goroutines,
// not on the step's path, and each rank looks only for the blocks it would read (ownsBlock: block b
// is CP rank b mod cp's on one node; on a group over several, each node's rank whose node-local
// part is b mod its parts looks for its node's part-file): its count is the blocks before the first
// of its own that is not there, and the MIN over the group is then the blocks before the first that
// its reader cannot see, which is what the prefetch can read (a rank that looked at every block
// made cp times the stats, each on a path a shared filesystem may make slow). The core reads one
// step ahead of the stream (Run), and at the start of step N it starts, for each request of step
// N+1, a check of the blocks that would follow the prefix its tree can serve now. Step N's
// consensus waits for those checks and carries every rank's answers (aheadVote), so step N+1 begins
// with their MIN and needs no l3_prefetch call: its count is the agreed answer shifted to the
// prefix the tree serves then. A check that does not cover that prefix (the tree lost part of it in
// between: an eviction, a flush) is started again and waited for, as is every check of the first
// step, and that step's counts are agreed in an l3_prefetch call of their own. Which checks start,
// over which keys, and whether a step needs the call are functions of the replicated tree and the
// replicated stream; only the answers are local, and they meet the group only through a MIN.

// existenceCheck is one request's look into the L3: blocks from block firstBlock of its prompt, of
// which this rank looks for its own.
type existenceCheck struct {
	seq        uint64
	firstBlock int
	blocks     int   // the blocks after firstBlock it covers
	own        []int // the indices (from firstBlock) of this rank's blocks among them, ascending
	found      int   // the blocks before the first of this rank's that was not there (once done)
	done       bool
	// agreed is the MIN of found over the group, when a step consensus carried it (hasAgreed:
	// aheadVote).
	agreed    int
	hasAgreed bool
}

// checkAhead starts the existence checks of the next step's requests (nil or a flush: none).
func (c *Core) checkAhead(next []workload.Event) {
	if c.l3 == nil || len(next) == 0 || next[0].Flush {
		return
	}
	for i := range next {
		req := &next[i].Request
		var cand prefetchCandidate
		if c.prefetchCandidate(req, &cand) {
			c.l3.ahead[req] = c.startCheck(cand)
			c.counters.L3ChecksAhead++
		}
	}
}

// startCheck asks the Env which of this rank's blocks among cand's, up to the most one prefetch
// could read, the L3 holds (how many of them, from the first).
func (c *Core) startCheck(cand prefetchCandidate) *existenceCheck {
	t := c.l3
	t.lastSeq.check++
	ch := &existenceCheck{
		seq:        t.lastSeq.check,
		firstBlock: cand.firstBlock,
		blocks:     min(len(cand.keys), c.prefetchCap()),
	}
	if ch.blocks > 1 && c.cfg.Testing.Bugs.has(BugCheckSpanShort) {
		ch.blocks-- // the bug: the last block is never looked for, so no prefetch reads it
	}
	var keys []uint64
	for j := range ch.blocks {
		if t.ownsBlock(cand.firstBlock + j) {
			ch.own, keys = append(ch.own, j), append(keys, cand.keys[j])
		}
	}
	t.checks[ch.seq] = ch
	c.env.Start(
		&ExistenceCheck{Seq: ch.seq, Keys: keys, FirstBlock: ch.firstBlock, Blocks: ch.blocks},
	)
	return ch
}

// prefetchCap is the most blocks one prefetch may read: the failed-block word's bound, and half the
// L2.
func (c *Core) prefetchCap() int {
	perPrefetch, _ := PrefetchLimits(c.geometry().Slots, c.l3.blockPages())
	return perPrefetch
}

// PrefetchLimits are the bounds on prefetching from the L3 into an L2 of slots, in blocks of
// blockPages pages: the most one prefetch may read (the failed-block word's bound, and half the
// L2), and the most that prefetches not yet resolved may hold together (an eighth of the L2:
// prefetchRoom says why). The serving clock's modelled L3 (SERVING.md) prefetches within the same.
func PrefetchLimits(slots, blockPages int) (perPrefetch, backlog int) {
	blockPages = max(1, blockPages)
	return min(maxPrefetchBlocks, slots/2/blockPages), slots / prefetchBacklogShare / blockPages
}

// countBlocks is the count for each request of the batch: the consecutive L3 blocks after the
// prefix its tree serves now, from the checks started a step ahead, or from checks started now
// where those do not cover it. agreed says whether the counts are the group's already: every
// candidate's check a step ahead covers its prefix and the last step consensus carried its MIN
// (aheadVote), so no l3_prefetch call is needed; else the counts are this rank's (the agreed ones
// among them the group's, which their MIN leaves as they are), for minCounts. cands receives each
// request's candidate; any says whether one request has one. Both any and agreed are replicated:
// they depend on the tree, the threshold and the stream only.
func (c *Core) countBlocks(
	batch []workload.Event,
	counts []uint64,
	cands []prefetchCandidate,
) (any, agreed bool, err error) {
	t := c.l3
	checks := make([]*existenceCheck, len(batch))
	agreed = true
	for i := range batch {
		req := &batch[i].Request
		ahead := t.ahead[req]
		delete(t.ahead, req)
		if !c.prefetchCandidate(req, &cands[i]) {
			continue
		}
		any = true
		if ahead == nil || cands[i].firstBlock < ahead.firstBlock {
			ahead = c.startCheck(cands[i]) // the tree lost part of the prefix since: look again
			c.counters.L3ChecksInStep++
		}
		checks[i], cands[i].check = ahead, ahead.seq
		agreed = agreed && ahead.hasAgreed
	}
	if err := c.env.Wait(waitL3Exists, func() bool { return checksDone(checks) }); err != nil {
		return false, false, err
	}
	for i, ch := range checks {
		if ch == nil {
			continue
		}
		found := ch.found
		if ch.hasAgreed &&
			!c.cfg.Testing.Bugs.has(BugLocalPrefetchCount) { // the bug: this rank's own count
			found = ch.agreed
		}
		counts[i] = uint64(max(0, found-(cands[i].firstBlock-ch.firstBlock)))
	}
	return any, agreed && any, nil
}

func checksDone(checks []*existenceCheck) bool {
	for _, ch := range checks {
		if ch != nil && !ch.done {
			return false
		}
	}
	return true
}

// checkDone records an existence check's answer.
func (t *l3Tier) checkDone(x Completion) {
	ch := t.checks[x.Seq]
	if ch == nil || x.Found < 0 || x.Found > len(ch.own) {
		panic(
			fmt.Sprintf(
				"cache: broken invariant: answer %d of L3 existence check %d, which is not in flight or has fewer keys\nL3 existence checks in flight: %d\n",
				x.Found,
				x.Seq,
				len(t.checks),
			),
		)
	}
	delete(t.checks, x.Seq)
	ch.found, ch.done = ch.blocks, true
	if x.Found < len(ch.own) {
		ch.found = ch.own[x.Found] // the first of this rank's blocks that is not there
	}
}

// aheadVote is, at a step consensus with an L3, this rank's count for each request of the next step
// (by its index in the batch; 0 for one with no check): the blocks its check a step ahead found,
// waited for here, where they have had the whole step to finish. The step consensus carries them,
// so the next step's prefetches are agreed without an l3_prefetch call of their own (countBlocks).
// Which words are filled is replicated (the stream, the tree when the checks started); only the
// counts are local, and they meet only in the MIN.
func (c *Core) aheadVote(kind ConsensusKind) ([]uint64, error) {
	if c.l3 == nil || kind != StepConsensus || len(c.next) == 0 || c.next[0].Flush {
		return nil, nil
	}
	checks := make([]*existenceCheck, len(c.next))
	for i := range c.next {
		checks[i] = c.l3.ahead[&c.next[i].Request]
	}
	if err := c.env.Wait(waitL3Exists, func() bool { return checksDone(checks) }); err != nil {
		return nil, err
	}
	words := make([]uint64, len(c.next))
	for i, ch := range checks {
		if ch != nil {
			words[i] = uint64(ch.found)
		}
		if c.cfg.Testing.Bugs.has(BugExistenceVoteMax) {
			// the bug: the MIN of complements, read back as the MAX (agreeAhead)
			words[i] = ^words[i]
		}
	}
	return words, nil
}

// agreeAhead records the group's MIN of the counts aheadVote brought, in each of the next step's
// checks.
func (c *Core) agreeAhead(agreed []uint64) {
	for i := range c.next {
		if ch := c.l3.ahead[&c.next[i].Request]; ch != nil {
			count := agreed[i]
			if c.cfg.Testing.Bugs.has(BugExistenceVoteMax) {
				count = ^count
			}
			ch.agreed, ch.hasAgreed = int(count), true
		}
	}
}
