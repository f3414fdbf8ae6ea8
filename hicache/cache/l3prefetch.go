package cache

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// Prefetching from the L3. At the start of a serving step every rank counts, for each request, the
// consecutive L3 blocks that follow the prefix its tree can serve (local existence checks, started
// a step ahead on the Env's goroutines (l3exists.go), whose answers can differ between ranks:
// another job evicts a block, a shared filesystem caches); the group takes the MIN in one call for
// the whole step; every rank reserves the same L2 object for that many blocks; each block's reader
// (ownsBlock: on each node, one) reads it into the slab. The request waits one step: the step's
// consensus agrees which reads finished (the prefetch frontier, and the lowest failed block), and
// at the next step the agreed blocks become an L2 node of the tree, loaded back and verified like
// any L2 hit. A block that failed to read is a miss from there on.

// prefetchCandidate is what one request could prefetch: its blocks from firstBlock on, by key.
type prefetchCandidate struct {
	firstBlock int
	keys       []uint64 // the blocks from firstBlock to the last whole block of the prompt
	check      uint64   // the existence check whose answer counts them (countBlocks)
	// the tokens the tree served when it was looked at, candidate or not (Testing.PrefetchPlanned)
	usable int
	missed bool // the L2 refused its prefetch's reservation (Testing.PrefetchPlanned)
}

// deferredRequest is a request waiting one step for its prefetch.
type deferredRequest struct {
	req      *workload.Request
	prefetch *l3Prefetch
}

// planPrefetch agrees what each request of the batch prefetches and starts this rank's reads. It
// returns the requests that wait for a prefetch; the caller serves the others now. Every rank calls
// it at the start of every serving step. Whether a request is a candidate is replicated (the tree,
// the threshold), so a step none of whose requests is one skips the l3_prefetch call on every rank
// alike (a rank that did not would be out of step with its group, which the tags of the next call
// show).
func (c *Core) planPrefetch(batch []workload.Event) ([]deferredRequest, error) {
	candidates := make([]prefetchCandidate, len(batch))
	if show := c.cfg.Testing.PrefetchPlanning; show != nil {
		show(L2View{c})
	}
	waiting, err := c.agreePrefetches(batch, candidates)
	if show := c.cfg.Testing.PrefetchPlanned; show != nil && err == nil {
		show(c.step, prefetchPlans(batch, candidates, waiting))
	}
	return waiting, err
}

// agreePrefetches is planPrefetch's decision: each candidate's count, agreed, capped, shared and
// started.
func (c *Core) agreePrefetches(
	batch []workload.Event,
	candidates []prefetchCandidate,
) ([]deferredRequest, error) {
	t := c.l3
	counts := make([]uint64, t.cfg.BatchRequests)
	any, agreed, err := c.countBlocks(batch, counts, candidates)
	if err != nil || !any {
		return nil, err
	}
	if agreed {
		c.counters.L3CountsAhead++
	} else {
		local := counts[:len(batch):len(batch)]
		if c.cfg.Testing.Bugs.has(BugLocalPrefetchCount) {
			local = append([]uint64(nil), local...) // the bug: keep this rank's own counts
		}
		if err := c.minCounts(counts); err != nil {
			return nil, err
		}
		if c.cfg.Testing.Bugs.has(BugLocalPrefetchCount) {
			copy(counts, local)
		}
	}
	var waiting []deferredRequest
	// by first key: a prefix two requests of the step share is read once
	started := map[uint64]*l3Prefetch{}
	for i := range batch {
		n := min(int(counts[i]), len(candidates[i].keys), c.prefetchCap())
		if n > 1 && c.cfg.Testing.Bugs.has(BugPrefetchOneShort) {
			n-- // the bug: one block fewer than every reader found
		}
		if n == 0 {
			continue
		}
		p := started[candidates[i].keys[0]]
		if p == nil {
			room := c.prefetchRoom()
			if room < n && c.cfg.Testing.Bugs.has(BugPrefetchAllOrNothing) {
				continue // the bug: a prefetch the room cuts short is not started at all
			}
			if n = min(n, room); n == 0 {
				continue
			}
			if p = c.startPrefetch(candidates[i], n); p == nil {
				candidates[i].missed = true
				continue
			}
			started[candidates[i].keys[0]] = p
		}
		waiting = append(waiting, deferredRequest{req: &batch[i].Request, prefetch: p})
	}
	return waiting, nil
}

// prefetchRoom is how many blocks a new prefetch may reserve, so that a failing L3 (every block
// corrupt, or unreadable) costs a few reads, never the L2's hits. Each bound is replicated:
// unresolved prefetches leave only at an agreed frontier, and the failures counted are agreed ones
// (resolvePrefetches).
//
//   - Prefetches not yet resolved hold at most an eighth of the L2 (prefetchBacklogShare). A failed
//     read holds its prefetch's object until the group agrees it, and the agreed frontier passes
//     one failed prefetch per consensus (l3Tier.vote): over an all-corrupt directory, prefetches
//     started every step piled up unresolved and held up to 89% of the L2 with objects that serve
//     nothing, evicting what would (45% of the L2's hits).
//   - After an agreed failure, none starts for 2, 4, ... steps, at most prefetchBackoffStepsMax
//     (l3Tier.backOff), and until a prefetch reads whole (as at the start of a job, before one has)
//     they start one at a time: each probe is resolved before the next. A failed block is removed,
//     and written anew when its KV is next in the L2, so an L3 that failed may serve again.
func (c *Core) prefetchRoom() int {
	t := c.l3
	if c.step < t.resumeStep || ((t.failStreak > 0 || !t.proven) && len(t.reads) > 0) {
		return 0
	}
	held := 0
	for _, p := range t.reads {
		held += len(p.keys)
	}
	_, backlog := PrefetchLimits(c.geometry().Slots, t.blockPages())
	return max(0, backlog-held)
}

const (
	// prefetchBacklogShare: unresolved prefetches hold at most 1/prefetchBacklogShare of the L2,
	// the share write_back keeps free for its writes.
	prefetchBacklogShare = 8
	// prefetchBackoffStepsMax bounds a back-off: a failing L3 is tried again at least this often.
	prefetchBackoffStepsMax = 64
)

// backOff records an agreed failed prefetch at step: no prefetch starts for twice as many steps as
// after the last failure in a row, from 2 to prefetchBackoffStepsMax.
func (t *l3Tier) backOff(step int64) {
	t.failStreak++
	t.resumeStep = step + min(int64(1)<<min(t.failStreak, 30), prefetchBackoffStepsMax)
}

// prefetchCandidate finds the request's blocks after the prefix the tree can serve now; false when
// fewer than --l3-prefetch-threshold tokens are not cached, or no whole block is left.
func (c *Core) prefetchCandidate(req *workload.Request, cand *prefetchCandidate) bool {
	B := c.l3.blockTokens()
	tokens := c.wholePages(req)
	usable := c.usablePrefix(tokens)
	if c.cfg.Testing.Bugs.has(BugServedPrefixPageLong) &&
		usable+c.geometry().PageTokens <= len(tokens) {
		// the bug: the decision counts a page past the tree's usable KV as served
		usable += c.geometry().PageTokens
	}
	if c.cfg.Testing.Bugs.has(BugServedPrefixPageShort) && usable > 0 {
		// the bug: the decision counts the tree's last usable page as not served
		usable -= c.geometry().PageTokens
	}
	cand.usable = usable
	left := len(tokens) - usable
	if c.cfg.Testing.Bugs.has(BugPrefetchThresholdOffByOne) {
		// the bug: a request with exactly the threshold's tokens left is taken for one below it
		left--
	}
	if left < c.l3.cfg.PrefetchThreshold || usable/B >= len(tokens)/B {
		return false
	}
	cand.firstBlock = usable / B
	cand.keys = chainKeys(tokens, B, len(tokens)/B, nil)[cand.firstBlock:]
	return true
}

func (c *Core) wholePages(req *workload.Request) []int32 {
	p := c.geometry().PageTokens
	return req.InputIDs[:len(req.InputIDs)/p*p]
}

// usablePrefix is how many of tokens the tree could serve now (nodes in L1 or in committed L2),
// without changing the tree.
func (c *Core) usablePrefix(tokens []int32) int {
	p := c.geometry().PageTokens
	cur, pos := c.tree.root, 0
	for pos+p <= len(tokens) {
		child := c.tree.childFor(cur, tokens[pos:pos+p])
		if child == nil {
			break
		}
		hollow := !(child.inL1() || (child.l2 != 0 && c.committed(child.l2)))
		if hollow &&
			!c.cfg.Testing.Bugs.has(
				BugServedPrefixHollow,
			) { // the bug: KV evicted from L1 and L2 counts as served
			break
		}
		matched := matchedAfterFirstPage(child.tokens, tokens[pos:], p)
		pos += matched
		if matched < len(child.tokens) {
			break
		}
		cur = child
	}
	return pos
}

// startPrefetch reserves one L2 object for n blocks, the same on every rank, and queues this rank's
// reads. A full L2 (every object protected) is a miss, decided alike on every rank.
func (c *Core) startPrefetch(cand prefetchCandidate, n int) *l3Prefetch {
	t := c.l3
	if show := c.cfg.Testing.PrefetchReserving; show != nil {
		show(n*t.blockPages(), L2View{c})
	}
	c.nextSeq++
	if c.cfg.Testing.Bugs.has(BugPrefetchReserveNoEvict) && c.alloc.FreeSlots() < n*t.blockPages() {
		c.counters.ReserveMisses++
		// the bug: a reservation that would have to evict is refused, as if the L2 had no room
		return nil
	}
	obj := pool.ObjectID(c.nextSeq)
	outcome, err := c.alloc.Reserve(obj, n*t.blockPages(), c.nextSeq, c.clock)
	if err != nil {
		panic(c.broken("reserve of %d pages for an L3 prefetch: %v", n*t.blockPages(), err))
	}
	c.dropEvicted()
	if outcome == pool.Miss {
		c.counters.ReserveMisses++
		return nil
	}
	t.lastSeq.read++
	p := &l3Prefetch{
		seq:        t.lastSeq.read,
		obj:        obj,
		firstBlock: cand.firstBlock,
		keys:       cand.keys[:n:n],
		failed:     -1,
	}
	t.reads, t.open = append(t.reads, p), append(t.open, p)
	c.counters.L3Prefetches++
	c.env.Prefetch(p.seq, false)
	c.counters.L3PrefetchBlocks += int64(n)
	for j := range n {
		if c.readsBlock(cand.firstBlock + j) {
			p.readsLeft++
		}
	}
	for j := range n {
		if !c.readsBlock(cand.firstBlock + j) {
			continue
		}
		slots, err := c.slotsOf(obj, j*t.blockPages(), t.blockPages())
		if err != nil {
			panic(c.broken("placement of fresh L3 prefetch object %d: %v", obj, err))
		}
		c.env.Start(
			&BlockRead{
				Prefetch: p.seq,
				Block:    j,
				Key:      p.keys[j],
				Pages:    slots,
				Tokens:   n * t.blockTokens(),
				Check:    cand.check,
			},
		)
	}
	return p
}

// readsBlock says whether this rank reads block index block of a prefetch into its node's slab: the
// rank whose node-local part owns it, on every node of the group (each node's part-file fills that
// node's parts).
func (c *Core) readsBlock(block int) bool {
	if c.cfg.Testing.Bugs.has(BugL3ReadOneNode) && c.cfg.GroupNode != 0 {
		return false // the bug: the other nodes' parts of the prefetched object are never filled
	}
	return c.l3.ownsBlock(block)
}

// attachPrefetch makes a resolved prefetch's agreed blocks part of the tree, just before its
// request is served: the hollow nodes of the prompt's path after the usable prefix, and a new node
// for the tokens past the path, point into the prefetched object, which is committed. A prefetch
// not resolved by now is given up (a timeout); one the tree no longer needs is given back.
func (c *Core) attachPrefetch(req *workload.Request, p *l3Prefetch) {
	t := c.l3
	if p.closed {
		return
	}
	p.closed = true
	if !p.resolved {
		// its object is given back when its reads are agreed done (resolvePrefetches)
		c.counters.L3PrefetchTimeouts++
		return
	}
	B := t.blockTokens()
	tokens := c.wholePages(req)
	start, end := p.firstBlock*B, (p.firstBlock+p.okBlocks)*B
	usable := c.usablePrefix(tokens)
	if p.okBlocks == 0 || usable >= end || usable < start {
		c.abortPrefetch(p)
		return
	}
	if attached := c.attachRange(tokens[:end], usable, start, p.obj); attached == 0 {
		c.abortPrefetch(p)
		return
	}
	if err := c.alloc.MarkObjectCommitted(p.obj); err != nil {
		c.fail(
			FailureAllocator,
			fmt.Errorf("commit the L2 object %d of L3 prefetch %d: %w", p.obj, p.seq, err),
		)
	}
}

// attachRange points the path's tokens from usable to the end at the object obj, whose first page
// holds the token at objStart, and returns how many tokens it attached. It stops at a node that
// already holds KV.
func (c *Core) attachRange(tokens []int32, usable, objStart int, obj pool.ObjectID) int {
	p := c.geometry().PageTokens
	path := c.tree.walk(
		tokens,
		nil,
	) // splits the node that runs past the end, so the path ends on a boundary
	parent, pos := c.tree.root, 0
	point := func(n *treeNode) {
		n.l2, n.l2Offset, n.fromL3 = obj, (n.startPos-objStart)/p, true
		c.objectNodes[obj] = append(c.objectNodes[obj], n)
	}
	for _, n := range path {
		if pos+len(n.tokens) <= usable {
			parent, pos = n, pos+len(n.tokens)
			continue
		}
		if n.inL1() || n.l2 != 0 {
			return max(0, pos-usable)
		}
		point(n)
		parent, pos = n, pos+len(n.tokens)
	}
	if pos < len(tokens) {
		leaf := c.tree.newNode(parent, tokens[pos:len(tokens):len(tokens)], pos)
		leaf.lastAccess = c.clock
		point(leaf)
	}
	return len(tokens) - usable
}
