package runner

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
)

// Ranks that disagree about which L3 blocks exist (SIMULATOR.md, "The runner under simulation"): a
// shared filesystem whose view is inconsistent, or slow to show a block, lets some ranks see a
// block file that others do not. In a job with a split view, some ranks' views lack one block in
// splitViewPer (by a hash of the rank and the key), for the whole run or until a moment of it; an
// existence check or a read on such a rank finds no file. Each rank looks only for the blocks it
// would read, and the group agrees the MIN of their counts in the step consensus (DESIGN.md, "The
// L3 tier"), so a prefetch must stop before the first block that a rank which looked for it could
// not see: a read of block i of a check's span, while a rank that looked for one of the blocks up
// to i in that check lacks it, is a prefetch past the agreed count, which a rank that takes its own
// view instead of the group's (existence_own_view, the core's local_prefetch_count) or the MAX
// (existence_vote_max) makes. A rank lacks a block at every moment up to the one its view shows
// it, so a read that starts while a looker lacks a block means the looker lacked it when it
// looked: the check is exact, never a guess.

// splitViewPer: a rank whose view is split lacks one block in this many.
const splitViewPer = 3

// splitView is a job's split view of the L3 directory (zero: every rank sees the same).
type splitView struct {
	ranks uint64 // one bit per world rank whose view lacks some blocks
	salt  uint64
	// how long after the run began its views agree again (0: never, they stay split)
	lag   time.Duration
	until time.Time // set as the run begins (zero: never)
}

// drawSplitView draws a job's split view from a stream of its own, so that a seed keeps the rest
// of its job as before: in half the jobs with an L3, each rank lacks blocks with odds of one half
// (at least one rank does), half of them for the whole run.
func drawSplitView(j *envSimJob) splitView {
	rng := rand.New(rand.NewPCG(j.seed, 0x5b117))
	if !j.opts.L3.Enabled() || rng.IntN(2) != 0 {
		return splitView{}
	}
	ranks := j.cp * j.dp
	v := splitView{ranks: uint64(1) << rng.IntN(ranks), salt: rng.Uint64()}
	for r := range ranks {
		if rng.IntN(2) == 0 {
			v.ranks |= 1 << r
		}
	}
	if rng.IntN(2) == 0 {
		v.lag = time.Duration(1+rng.IntN(10_000)) * time.Microsecond
	}
	return v
}

func (v *splitView) on() bool { return v.ranks != 0 }

// String says the view in a job's line ("" when it is not split).
func (v splitView) String() string {
	if !v.on() {
		return ""
	}
	var ranks []string
	for r := range 64 {
		if v.ranks&(1<<r) != 0 {
			ranks = append(ranks, strconv.Itoa(r))
		}
	}
	until := "the whole run"
	if v.lag > 0 {
		until = "its first " + v.lag.String()
	}
	return fmt.Sprintf(", world ranks %s lack a block in %d for %s", strings.Join(ranks, " "),
		splitViewPer, until)
}

// lacks says whether rank's view lacks the block of key at instant at.
func (v *splitView) lacks(rank int, key uint64, at time.Time) bool {
	if v.ranks&(1<<rank) == 0 || !v.until.IsZero() && !at.Before(v.until) {
		return false
	}
	h := v.salt ^ key ^ uint64(rank)*0x9e3779b97f4a7c15
	h ^= h >> 31
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 29
	return h%splitViewPer == 0
}

// blockKey is the key of a block file's path (DIR/<fingerprint>/<xx>/<key hex>[.p<i>of<k>].blk).
func blockKey(path string) (uint64, bool) {
	base := path[strings.LastIndexByte(path, '/')+1:]
	if len(base) < 16 || !strings.HasSuffix(base, ".blk") {
		return 0, false
	}
	key, err := strconv.ParseUint(base[:16], 16, 64)
	return key, err == nil
}

// hidden says whether the file at path is a block that rank's view lacks now (under the fs lock),
// and counts it.
func (f *simFS) hidden(rank int, path string) bool {
	if !f.view.on() {
		return false
	}
	key, ok := blockKey(path)
	if !ok || !f.view.lacks(rank, key, time.Now()) {
		return false
	}
	f.hid++
	return true
}

// checkRecord is one rank's existence check: the keys it looked for, each with its block's index in
// the check's span, and when it was started.
type checkRecord struct {
	keys  []uint64
	index []int
	at    time.Time
}

// lookedFor records an existence check as its rank starts it.
func (v *simEnv) lookedFor(c *cache.ExistenceCheck) {
	if !v.e.fs.view.on() {
		return
	}
	g := v.geometry
	part, parts := v.e.job.place.Part[v.job.Topo.CPRank], g.NodeParts()
	rec := &checkRecord{keys: c.Keys, at: time.Now()}
	for i := range c.Blocks { // the rank's own blocks, as the core's ownsBlock says
		if (c.FirstBlock+i)%parts == part {
			rec.index = append(rec.index, i)
		}
	}
	if len(rec.index) != len(rec.keys) {
		v.e.violate(
			"split view: world rank %d's existence check %d looks for %d keys among blocks %d..%d, of which %d are its own",
			v.world, c.Seq, len(c.Keys), c.FirstBlock, c.FirstBlock+c.Blocks-1, len(rec.index),
		)
		rec.index = rec.index[:min(len(rec.index), len(rec.keys))]
		rec.keys = rec.keys[:len(rec.index)]
	}
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	recs := v.m.checks[c.Seq]
	if recs == nil {
		recs = make([]*checkRecord, v.e.job.cp)
		v.m.checks[c.Seq] = recs
	}
	recs[v.job.Topo.CPRank] = rec
}

// reads checks a block read as its reader starts it: no rank that looked for a block of the read's
// check up to this one lacks it now.
func (v *simEnv) reads(r *cache.BlockRead) {
	if !v.e.fs.view.on() {
		return
	}
	now := time.Now()
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	recs := v.m.checks[r.Check]
	at := -1
	for _, rec := range recs {
		if k := indexOf(rec, r.Key); k >= 0 {
			at = rec.index[k]
		}
	}
	if at < 0 {
		v.e.violate(
			"split view: world rank %d reads block %d of prefetch %d, which no rank looked for in existence check %d",
			v.world, r.Block, r.Prefetch, r.Check,
		)
		return
	}
	for cp, rec := range recs {
		for k := 0; rec != nil && k < len(rec.keys) && rec.index[k] <= at; k++ {
			world := v.job.Topo.CPGroup*v.e.job.cp + cp
			if v.e.fs.view.lacks(world, rec.keys[k], now) {
				v.e.violate(
					"split view: world rank %d reads block %d of existence check %d's span (prefetch %d) though world rank %d, which looked for block %d of it, lacks it: the prefetch runs past the group's MIN",
					v.world, at, r.Check, r.Prefetch, world, rec.index[k],
				)
				return
			}
		}
	}
}

// indexOf is where key is among rec's keys (-1: not there, or no record).
func indexOf(rec *checkRecord, key uint64) int {
	if rec == nil {
		return -1
	}
	for k, x := range rec.keys {
		if x == key {
			return k
		}
	}
	return -1
}
