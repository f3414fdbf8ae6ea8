package cache

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/workload"
)

// Existence checks ahead of need. A request's L3 blocks are looked for on the Env's I/O goroutines, not on the
// step's path, and each rank looks only for the blocks it would read (ownsBlock: block b is CP rank b mod cp's on one node; on a group over several nodes, each
// node's rank whose node-local part is b mod its parts looks for its node's part-file): its count
// is the blocks before the first of its own that is not there, and the MIN over the group is then the blocks
// before the first that its reader cannot see, which is what the prefetch can read (a rank that looked at every
// block made cp times the stats, each on a path a shared filesystem may make slow). the core reads one step ahead of the stream (Run), and at the start of step N it starts, for
// each request of step N+1, a check of the blocks that would follow the prefix its tree can serve now. At step
// N+1 the count each rank brings to the l3_prefetch MIN is read from those answers: the blocks from the prefix
// the tree serves then, as far as the check found them. A check that does not cover that prefix (the tree lost
// part of it in between: an eviction, a flush) is started again and waited for, as is every check of the first
// step. Which checks start, and over which keys, is a function of the replicated tree and the replicated
// stream; only the answers are local, and they meet the group only through the MIN, as before.

// existenceCheck is one request's look into the L3: blocks from block firstBlock of its prompt, of which this
// rank looks for its own.
type existenceCheck struct {
	seq        uint64
	firstBlock int
	blocks     int   // the blocks after firstBlock it covers
	own        []int // the indices (from firstBlock) of this rank's blocks among them, ascending
	found      int   // the blocks before the first of this rank's that was not there (once done)
	done       bool
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

// startCheck asks the Env which of this rank's blocks among cand's, up to the most one prefetch could read, the
// L3 holds (how many of them, from the first).
func (c *Core) startCheck(cand prefetchCandidate) *existenceCheck {
	t := c.l3
	t.lastSeq.check++
	ch := &existenceCheck{seq: t.lastSeq.check, firstBlock: cand.firstBlock, blocks: min(len(cand.keys), c.prefetchCap())}
	var keys []uint64
	for j := range ch.blocks {
		if t.ownsBlock(cand.firstBlock + j) {
			ch.own, keys = append(ch.own, j), append(keys, cand.keys[j])
		}
	}
	t.checks[ch.seq] = ch
	c.env.Start(&ExistenceCheck{Seq: ch.seq, Keys: keys})
	return ch
}

// prefetchCap is the most blocks one prefetch may read: the failed-block word's bound, and half the L2.
func (c *Core) prefetchCap() int {
	return min(maxPrefetchBlocks, c.geometry().Slots/2/c.l3.blockPages())
}

// countBlocks is this rank's count for each request of the batch: the consecutive L3 blocks after the prefix
// its tree serves now, from the checks started a step ahead, or from checks started now where those do not
// cover it. cands receives each request's candidate; any says whether one request has one (replicated: it
// depends on the tree and the threshold only).
func (c *Core) countBlocks(batch []workload.Event, counts []uint64, cands []prefetchCandidate) (any bool, err error) {
	t := c.l3
	checks := make([]*existenceCheck, len(batch))
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
		checks[i] = ahead
	}
	if err := c.env.Wait(waitL3Exists, func() bool { return checksDone(checks) }); err != nil {
		return false, err
	}
	for i, ch := range checks {
		if ch != nil {
			counts[i] = uint64(max(0, ch.found-(cands[i].firstBlock-ch.firstBlock)))
		}
	}
	return any, nil
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
		panic(fmt.Sprintf("cache: answer %d of L3 existence check %d, which is not in flight or has fewer keys", x.Found, x.Seq))
	}
	delete(t.checks, x.Seq)
	ch.found, ch.done = ch.blocks, true
	if x.Found < len(ch.own) {
		ch.found = ch.own[x.Found] // the first of this rank's blocks that is not there
	}
}
