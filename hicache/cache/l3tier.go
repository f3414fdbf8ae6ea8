package hicache

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/pool"
)

// The L3 tier (DESIGN.md, "The L3 tier"): blocks of --l3-block-tokens tokens, aligned to the start of the prompt
// and keyed by a chain over every token before their end, stored whole (every CP rank's parts) by one rank of
// the group. Every decision (which block to write, what to prefetch, when an L2 object is free again) is a
// function of replicated state and agreed values; only the file I/O is local, done by the block's one writer or
// reader, and its completion reaches the group through the step consensus.

// prefetchBlockBits is the low part of the failed-prefetch word, the block index within its prefetch.
const prefetchBlockBits = 20

// maxPrefetchBlocks bounds one prefetch, so that its block index fits the failed-prefetch word.
const maxPrefetchBlocks = 1<<prefetchBlockBits - 1

// l3Tier is one rank's part of the L3: the store, the block writes and prefetches in flight, and the two I/O
// goroutines that do this rank's share of them.
type l3Tier struct {
	opts       L3Options
	store      *l3.Store
	slabs      l3.Slabs
	cpRank     int
	cpSize     int
	pageTokens int
	// keeper: CP rank 0 keeps the group's byte budget; it learns every block the group wrote (Adopt), while the
	// other ranks' stores only read, write and check files.
	keeper bool

	backedUp map[pool.ObjectID]bool // replicated, write_back: L2 objects whose blocks were scheduled
	writes   []*l3Write             // scheduled, not yet retired, ascending seq
	lastSeq  struct{ write, read uint64 }
	reads    []*l3Prefetch // prefetches not yet resolved, ascending seq
	open     []*l3Prefetch // prefetches not yet attached to the tree or given up (resolved or not)

	log                 *slog.Logger // the first failed write and read of this rank are said, with their cause
	writeJobs, readJobs chan func(buf *[]byte)
	workers             sync.WaitGroup

	// per rank: this rank's I/O
	writesDone, writeBytes, writeErrors atomic.Int64
	readsDone, readBytes, readFailures  atomic.Int64
	// replicated: what the group decided
	prefetches, prefetchBlocks, prefetchMisses, prefetchTimeouts int64
	prefetchWaitUs                                               []float64 // issue to agreed completion, this rank
}

// l3Write is one block on its way from the L2 to the L3. Every rank holds it (its L2 objects stay protected
// until the group agrees it is done); only the writer rank does the I/O.
type l3Write struct {
	seq   uint64
	key   uint64
	pages []l3.PageSlot
	objs  []pool.ObjectID
	done  atomic.Bool
}

// l3Prefetch is the consecutive blocks of one request read from the L3 into one fresh L2 object. Every rank
// reserved the object; each block is read by one rank (its index mod cp).
type l3Prefetch struct {
	seq        uint64
	obj        pool.ObjectID
	firstBlock int      // the first block's index in the prompt
	keys       []uint64 // one per block
	issued     time.Time
	deadline   time.Time    // the timeout policy's
	readsLeft  atomic.Int32 // this rank's reads not finished
	failed     atomic.Int32 // the lowest block index (within the prefetch) whose read failed on this rank; -1 none

	resolved bool // the group agreed its outcome
	okBlocks int  // blocks every rank read (agreed): the prefix the tree may use
	closed   bool // attached, given up or flushed: nothing more to do
}

func (p *l3Prefetch) done() bool { return p.readsLeft.Load() == 0 }

// newL3Tier opens the store; nothing is shared yet, so a failure leaves nothing behind.
func newL3Tier(o L3Options, g pool.Geometry, seed uint64, cpRank int, log *slog.Logger) (*l3Tier, error) {
	budget := o.Bytes
	if cpRank != 0 {
		budget = l3.Unbounded // only the keeper evicts (and scans the directory at start)
	}
	store, err := l3.Open(o.Dir, o.namespace(g, seed), budget)
	if err != nil {
		return nil, err
	}
	if o.testFailWrites {
		store.FailWritesForTest(errors.New("no space left on device (injected)"))
	}
	t := &l3Tier{opts: o, store: store, log: log, cpRank: cpRank, cpSize: g.CPSize, pageTokens: g.PageTokens, keeper: cpRank == 0,
		backedUp:  map[pool.ObjectID]bool{},
		writeJobs: make(chan func(*[]byte), 1024), readJobs: make(chan func(*[]byte), 1024)}
	for _, jobs := range []chan func(*[]byte){t.writeJobs, t.readJobs} {
		t.workers.Add(1)
		go func() {
			defer t.workers.Done()
			var buf []byte // one block's payload, reused
			for job := range jobs {
				job(&buf)
			}
		}()
	}
	return t, nil
}

// attachSlabs gives the tier the mapped L2, once the slab exists.
func (t *l3Tier) attachSlabs(g pool.Geometry, mem [][]byte) {
	t.slabs = l3.Slabs{Geometry: g, Mem: mem}
}

// close waits for the I/O queued so far; the slab must still be mapped.
func (t *l3Tier) close() {
	close(t.writeJobs)
	close(t.readJobs)
	t.workers.Wait()
}

func (t *l3Tier) blockTokens() int { return t.opts.BlockTokens }
func (t *l3Tier) blockPages() int  { return t.opts.BlockTokens / t.pageTokens }

// vote is what the tier brings to a consensus: the write frontier, and the prefetch frontier with the lowest
// failed read. The prefetch frontier stops at this rank's first failed prefetch, so that an agreed frontier holds
// at most one failed prefetch, the one the MIN of the failure words names (the others' frontiers stop at or
// before theirs): every rank learns every failure, one consensus at a time.
func (t *l3Tier) vote(v *vote) {
	v.storeFrontier = t.lastSeq.write
	for _, w := range t.writes {
		if !w.done.Load() {
			v.storeFrontier = w.seq - 1
			break
		}
	}
	v.prefetchFrontier, v.prefetchFailed = t.lastSeq.read, noFailure
	for _, p := range t.reads {
		if !p.done() {
			v.prefetchFrontier = p.seq - 1
			return
		}
		if b := p.failed.Load(); b >= 0 {
			v.prefetchFrontier, v.prefetchFailed = p.seq, p.seq<<prefetchBlockBits|uint64(b)
			return
		}
	}
}

// idle says whether this rank has no L3 I/O in flight.
func (t *l3Tier) idle() bool {
	for _, w := range t.writes {
		if !w.done.Load() {
			return false
		}
	}
	for _, p := range t.reads {
		if !p.done() {
			return false
		}
	}
	return true
}

// prefetchSettled says whether a step with the prefetch policy may enter its consensus: every read done, or under
// the timeout policy past its deadline.
func (t *l3Tier) prefetchSettled(now time.Time) bool {
	for _, p := range t.reads {
		if !p.done() && (t.opts.PrefetchPolicy == PrefetchWaitComplete || now.Before(p.deadline)) {
			return false
		}
	}
	return true
}

// writeBacklog says whether the writes in flight hold too much of the L2: the next consensus then waits for them,
// as throttleWrites waits for backups. Replicated: it counts scheduled writes, not finished ones.
func (t *l3Tier) writeBacklog(l2Slots int) bool {
	return len(t.writes)*t.blockPages() > l2Slots/4
}

// retireWrites ends the writes every rank finished: their L2 objects are free to go, and the keeper counts the
// blocks in its budget.
func (c *controller) retireWrites(upTo uint64) {
	t := c.l3
	n := 0
	for n < len(t.writes) && t.writes[n].seq <= upTo {
		w := t.writes[n]
		for _, obj := range w.objs {
			if err := c.alloc.Unprotect(obj); err != nil {
				c.fail(FailureAllocator, fmt.Errorf("unprotect L2 object %d after its L3 write: %w", obj, err))
			}
		}
		if t.keeper {
			t.store.Adopt(w.key)
		}
		n++
	}
	t.writes = t.writes[n:]
}

// resolvePrefetches records the agreed outcome of every prefetch up to the agreed frontier: all its blocks, or
// those before the lowest failed one. A prefetch already given up (its request served without it) gives back
// its L2 object now that no read can touch it.
func (c *controller) resolvePrefetches(upTo, failed uint64) {
	t := c.l3
	n := 0
	for n < len(t.reads) && t.reads[n].seq <= upTo {
		p := t.reads[n]
		p.resolved, p.okBlocks = true, len(p.keys)
		if failed != noFailure && failed>>prefetchBlockBits == p.seq && !t.opts.testIgnoreFailedReads {
			p.okBlocks = int(failed & (1<<prefetchBlockBits - 1))
			t.prefetchMisses++
		}
		t.prefetchWaitUs = append(t.prefetchWaitUs, float64(time.Since(p.issued).Nanoseconds())/1e3)
		if p.closed {
			c.abortPrefetch(p)
		}
		n++
	}
	t.reads = t.reads[n:]
}

// abortPrefetch gives back a prefetch's L2 object, which nothing points to.
func (c *controller) abortPrefetch(p *l3Prefetch) {
	if err := c.alloc.Abort(p.obj); err != nil {
		c.fail(FailureAllocator, fmt.Errorf("abort the L2 object %d of L3 prefetch %d: %w", p.obj, p.seq, err))
	}
}

// resetL3 forgets what a flush wiped from the L2: the writes and prefetches (drained by the flush) and the
// write_back marks. The L3 itself, and what the group knows is in it, stay.
func (t *l3Tier) reset() {
	t.writes, t.reads = t.writes[:0], t.reads[:0]
	for _, p := range t.open {
		p.closed = true
	}
	t.open = t.open[:0]
	clear(t.backedUp)
}

// pageSlots appends where pages [first, first+count) of an L2 object live, in page order.
func (c *controller) pageSlots(obj pool.ObjectID, first, count int, into []l3.PageSlot) ([]l3.PageSlot, error) {
	err := c.eachPageSlot(obj, first, count, func(_, slab, slot int) {
		into = append(into, l3.PageSlot{Slab: int32(slab), Slot: int32(slot)})
	})
	return into, err
}
