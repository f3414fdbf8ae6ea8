package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/hicache/workload"
)

// The simulator's own account of the L3's blocks, apart from the store both the core and the
// simulator use: which key names which tokens (from the workload: every whole block of every
// prompt, by its chain key), and, per job, the blocks read into the slab against the blocks it
// checked there byte for byte. The store's checksum only says that a file is whole, not that it
// holds its key's KV; a block read that is not checked here (its key names no block of the
// workload) is a coverage violation, as a load-back that is not verified is.
type blockBook struct {
	content map[uint64]blockContent // by chain key
	// blocks scattered into the slab by a read, and checked there
	read, checked int64
}

// blockContent is what a key names: the block's tokens and where they start in the prompt, and
// whether it is the last whole block of some prompt (an existence check's span may end there:
// votes.go).
type blockContent struct {
	tokens     []int32
	startPos   int
	endsPrompt bool
	// the whole pages of a prompt it is a block of (the path before it: served.go)
	prompt []int32
}

// learn records the keys of every whole block of every request of a group's events.
func (b *blockBook) learn(events []workload.Event, j *JobConfig) {
	if b.content == nil {
		b.content = map[uint64]blockContent{}
	}
	B, pt := j.L3.BlockTokens, j.Geometry.PageTokens
	for _, e := range events {
		ids := e.Request.InputIDs
		ids = ids[:len(ids)/pt*pt]
		key := uint64(0)
		for k := 0; (k+1)*B <= len(ids); k++ {
			key = l3block.ChainKey(key, ids[k*B:(k+1)*B])
			c := b.content[key]
			c.tokens, c.startPos, c.prompt = ids[k*B:(k+1)*B], k*B, ids
			c.endsPrompt = c.endsPrompt || (k+2)*B > len(ids)
			b.content[key] = c
		}
	}
}

// written checks a block write's key against its tokens: the key must name exactly the block the
// write holds.
func (b *blockBook) written(j *job, r *rank, w *cache.BlockWrite) {
	if r != nil {
		if r.g.wrote == nil {
			r.g.wrote = map[uint64]bool{}
		}
		r.g.wrote[blockID(w.StartPos, w.Tokens)] = true
	}
	c, ok := b.content[w.Key]
	if !ok || c.startPos != w.StartPos || !slices.Equal(c.tokens, w.Tokens) {
		j.violate(
			r,
			fmt.Sprintf(
				"L3 block write %d (key %016x) holds tokens %d..%d, which that key does not name (known %v, at %d)",
				w.Seq,
				w.Key,
				w.StartPos,
				w.StartPos+len(w.Tokens)-1,
				ok,
				c.startPos,
			),
		)
	}
}

// readInto counts a block read into the slab, and checks its node's parts there against the content
// its key names.
func (b *blockBook) readInto(j *job, r *rank, w *cache.BlockRead) {
	b.read++
	c, ok := b.content[w.Key]
	if !ok {
		return // unchecked: the coverage check at the end names it
	}
	if !r.g.mem.NodeSlotsMatch(r.node, w.Pages, c.tokens, c.startPos, j.cfg.Geometry.NodeParts()) {
		j.violate(
			r,
			fmt.Sprintf(
				"the L3 read of block %d of prefetch %d (key %016x) put bytes into the slab that are not its content",
				w.Block,
				w.Prefetch,
				w.Key,
			),
		)
		return
	}
	b.checked++
}

// checkCovered: every block read into the slab was checked there.
func (b *blockBook) checkCovered(j *job) {
	if b.read != b.checked {
		j.violate(
			nil,
			fmt.Sprintf(
				"coverage: %d L3 blocks read into the slab, %d checked against their content",
				b.read,
				b.checked,
			),
		)
	}
}

// writesOnce is the write model's one rule: a block is one decision of the group's write policy,
// written once by its node's writer, so a write of a key that this writer is still writing is the
// policy deciding twice (it wastes the I/O and races the file; no byte goes wrong, so no other
// check sees it).
func (r *rank) writesOnce(w *cache.BlockWrite) {
	for _, p := range r.queues[queueWrites] {
		if o := p.work.(*cache.BlockWrite); o.Key == w.Key {
			r.g.j.violate(
				r,
				fmt.Sprintf(
					"L3 block key %016x (tokens %d..%d) is written twice at once: write %d while write %d is in flight (the write policy decided it twice)",
					w.Key,
					w.StartPos,
					w.StartPos+len(w.Tokens)-1,
					w.Seq,
					o.Seq,
				),
			)
			return
		}
	}
}

// prefetchRecord is what the Env saw of one L3 prefetch of a group: the blocks its readers read
// (each block is read on every node, by one rank), and whether any read failed there.
type prefetchRecord struct {
	blocks map[int]bool
	failed bool
}

// prefetchRead records a finished read of a prefetch's block.
func (g *group) prefetchRead(w *cache.BlockRead, err error) {
	if g.prefetches == nil {
		g.prefetches = map[uint64]*prefetchRecord{}
	}
	p := g.prefetches[w.Prefetch]
	if p == nil {
		p = &prefetchRecord{blocks: map[int]bool{}}
		g.prefetches[w.Prefetch] = p
	}
	p.blocks[w.Block] = true
	p.failed = p.failed || err != nil
}

// checkPrefetches is the failed-read model, for a group that ran to its end (every read finished
// and agreed): the group agreed as many prefetches, of as many blocks, as its readers read, and cut
// short exactly those of them one of whose reads failed on some rank. The agreement is a MIN over
// the ranks' failure words, so a rule that forgets a failure, or invents one (a timeout taken for a
// failure, a failure kept for the next prefetch), agrees the same wrong value everywhere: only a
// count kept outside the core sees it.
func (g *group) checkPrefetches(c *cache.Counters) {
	var blocks, failed int64
	for _, p := range g.prefetches {
		blocks += int64(len(p.blocks))
		if p.failed {
			failed++
		}
	}
	if n := int64(len(g.prefetches)); n != c.L3Prefetches || blocks != c.L3PrefetchBlocks ||
		failed != c.L3PrefetchMisses {
		g.j.violate(
			g.ranks[0],
			fmt.Sprintf(
				"the L3 prefetches read: %d, of %d blocks, %d with a failed read; the group agreed %d, of %d blocks, %d cut short by a failed read",
				n,
				blocks,
				failed,
				c.L3Prefetches,
				c.L3PrefetchBlocks,
				c.L3PrefetchMisses,
			),
		)
	}
}

// The write_through model: a block is written once every L2 object holding it is committed, so
// every block whole inside one committed backup (its tokens are the audit's) must have been written
// by the end of its group's run, by its node's writer (a write that fails, or finds the block
// there, was still decided). A policy that forgot a block, or wrote only some, agrees it on every
// rank and moves no wrong byte.

// blockID names a block by where it starts and its tokens (a backup's audit does not carry its
// path's keys).
func blockID(startPos int, tokens []int32) uint64 {
	return l3block.ChainKey(uint64(startPos)+1, tokens)
}

// committedWhole notes the blocks whole inside a committed backup.
func (g *group) committedWhole(a *cache.Audit) {
	if !g.j.cfg.L3.Enabled || g.j.cfg.L3.WritePolicy != cache.L3WriteThrough {
		return
	}
	g.mustWriteWhole(a.StartPos, a.Tokens)
}

// mustWriteWhole notes every block whole inside tokens (from startPos) as one its group must write.
func (g *group) mustWriteWhole(startPos int, tokens []int32) {
	B := g.j.cfg.L3.BlockTokens
	if g.mustWrite == nil {
		g.mustWrite = map[uint64][2]int{}
	}
	end := startPos + len(tokens)
	for k := (startPos + B - 1) / B; (k+1)*B <= end; k++ {
		g.mustWrite[blockID(k*B, tokens[k*B-startPos:(k+1)*B-startPos])] = [2]int{
			k * B,
			(k+1)*B - 1,
		}
	}
}

// checkWritten: every block whole in a committed backup (write_through), or in an audited object
// about to be evicted (write_back: writeback.go), was written.
func (g *group) checkWritten() {
	where := "a committed backup"
	if g.j.cfg.L3.WritePolicy == cache.L3WriteBack {
		where = "committed L2 through an object about to be evicted"
	}
	for id, span := range g.mustWrite {
		if !g.wrote[id] {
			g.j.violate(
				g.ranks[0],
				fmt.Sprintf(
					"%s: the block of tokens %d..%d was whole in %s and never written to the L3",
					g.j.cfg.L3.WritePolicy,
					span[0],
					span[1],
					where,
				),
			)
			return
		}
	}
}

// writeBlock is a writer rank's block write: check every rank's parts against the block's content
// (the real writer checks its node's, which it gathers), gather its node's parts, and publish its
// node's file.
func (j *job) writeBlock(r *rank, w *cache.BlockWrite) error {
	j.blocks.written(j, r, w)
	if r.store.Exists(w.Key) {
		return nil
	}
	if !r.g.mem.SlotsMatch(w.Pages, w.Tokens, w.StartPos) {
		j.violate(
			r,
			fmt.Sprintf(
				"L3 block write %d (key %016x, tokens %d..%d) gathered bytes that are not its content from the shared slab",
				w.Seq,
				w.Key,
				w.StartPos,
				w.StartPos+len(w.Tokens)-1,
			),
		)
		return cache.ErrBlockMismatch
	}
	// The real block I/O on the slab (l3.GatherFromSlab, ScatterIntoSlab), whose runs of slots the
	// check above and every later load-back verify.
	payload, err := r.store.GatherFromSlab(w.Pages, r.slabs(), &r.writeBuf)
	if err != nil {
		return err
	}
	if err := r.store.Write(w.Key, len(w.Tokens), payload, false); err != nil {
		return err
	}
	j.l3.published(r.store, w.Key, j.cfg.CP)
	return nil
}

// readBlock is a reader rank's block read: past its deadline a failed read, else the directory's
// answer, scattered into the slab when it is a whole block.
func (j *job) readBlock(r *rank, w *cache.BlockRead, p *pending) error {
	if p.hung || (p.deadline > 0 && p.deadline <= j.now && p.readyAt > j.now) {
		j.readsGivenUp++
		return errors.New("the L3 read did not finish by its deadline (sim)")
	}
	data, err := r.store.ReadBlock(w.Key, len(w.Pages), &r.readBuf)
	if err != nil {
		return err
	}
	if err := r.store.ScatterIntoSlab(data, w.Pages, r.slabs()); err != nil {
		return err
	}
	j.blocks.readInto(j, r, w)
	return nil
}
