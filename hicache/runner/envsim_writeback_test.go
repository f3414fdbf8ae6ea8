package runner

import (
	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/l3block"
)

// The L3 write policies' models, as the core's simulator's (hicache/sim, writeback.go and
// blocks.go), over the runner's real writers: write_through writes a block once every L2 object
// holding it is committed, so every block whole inside a committed backup (its tokens are the
// audit's) must be written by the end of its group's run; write_back writes a block only when the
// L2 is about to evict an object holding it, never before. At every consensus the core shows each
// rank its L2 (cache.Testing.NearEviction: the free slots and eviction order, which no Env call
// shows); below the watermark (an eighth of the L2, at least a block) the oldest objects holding
// that many pages are about to go. A write_back block write must then touch a slot of one of them
// (a write at commit, write_back_at_commit, is early: I/O spent on KV the L2 still serves), and
// every block whole in an audited one must be written by the end (a pass that forgot some,
// write_back_oldest_only, loses their blocks when the L2 evicts them; no byte goes wrong). Not
// modelled here: blocks that span two objects (the simulator's served-prefix model names their
// pages; write_back_one_object is its to catch).

// blockID names a block by where it starts and its tokens (an audit does not carry its path's
// keys), as the simulator's does.
func blockID(startPos int, tokens []int32) uint64 {
	return l3block.ChainKey(uint64(startPos)+1, tokens)
}

// mustWriteWhole notes every block whole inside tokens (from startPos) as one the group must write
// (under m.mu).
func (m *groupModel) mustWriteWhole(blockTokens, startPos int, tokens []int32) {
	B, end := blockTokens, startPos+len(tokens)
	for k := (startPos + B - 1) / B; (k+1)*B <= end; k++ {
		id := blockID(k*B, tokens[k*B-startPos:(k+1)*B-startPos])
		m.mustWrite[id] = [2]int{k * B, (k+1)*B - 1}
	}
}

// auditedBlocks notes what an audit says its object holds (under m.mu): under write_through its
// whole blocks must be written; under write_back, if the object comes near eviction.
func (m *groupModel) auditedBlocks(l3 config.L3Options, a *cache.Audit) {
	switch {
	case !l3.Enabled():
	case l3.WritePolicy == cache.L3WriteThrough:
		m.mustWriteWhole(l3.BlockTokens, a.StartPos, a.Tokens)
	default:
		m.objects[a.Object] = auditedObject{startPos: a.StartPos, tokens: a.Tokens}
	}
}

// nearEviction is the core's view of the L2 at a consensus on this rank (write_back jobs only): the
// slots it may write back until its next consensus, and the blocks that must be written by the end.
func (v *simEnv) nearEviction(view cache.L2View) {
	l3, g := v.opts.L3, v.geometry
	watermark := max(g.Slots/8, l3.BlockTokens/g.PageTokens)
	clear(v.evicting)
	if view.FreeSlots() >= watermark {
		return
	}
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	for _, obj := range view.OldestEvictable(watermark) {
		for _, s := range view.Slots(obj) {
			v.evicting[s] = true
		}
		if a, ok := v.m.objects[obj]; ok {
			v.m.mustWriteWhole(l3.BlockTokens, a.startPos, a.tokens)
		}
	}
}

// writes records a block write as its writer starts it and, under write_back, checks its moment: one
// of its pages is in an object about to be evicted at this rank's last consensus.
func (v *simEnv) writes(w *cache.BlockWrite) {
	v.m.mu.Lock()
	v.m.wrote[blockID(w.StartPos, w.Tokens)] = true
	v.m.mu.Unlock()
	if v.opts.L3.WritePolicy != cache.L3WriteBack {
		return
	}
	for _, s := range w.Pages {
		if v.evicting[s] {
			v.writeBacks++
			return
		}
	}
	v.e.violate(
		"write_back: world rank %d started block write %d (tokens %d..%d) while none of its L2 objects was about to be evicted (%d slots near eviction at its last consensus)",
		v.world, w.Seq, w.StartPos, w.StartPos+len(w.Tokens)-1, len(v.evicting),
	)
}

// checkWritten, at the end of a group that ran to it: every block whole in a committed backup
// (write_through), or in an audited object that came near eviction (write_back), was written.
func (e *envSim) checkWritten(group int, violate func(string, ...any)) {
	l3 := e.job.opts.L3
	if !l3.Enabled() {
		return
	}
	where := "a committed backup"
	if l3.WritePolicy == cache.L3WriteBack {
		where = "an audited L2 object about to be evicted"
	}
	m := e.models[group]
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, span := range m.mustWrite {
		if !m.wrote[id] {
			violate(
				"%v: group %d never wrote the block of tokens %d..%d to the L3, though it was whole in %s",
				l3.WritePolicy, group, span[0], span[1], where,
			)
			return
		}
	}
}
