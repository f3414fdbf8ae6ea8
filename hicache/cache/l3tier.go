package cache

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// The L3 tier's decisions (DESIGN.md, "The L3 tier"): blocks of BlockTokens tokens, aligned to the
// start of the prompt and keyed by a chain over every token before their end, stored whole (every
// CP rank's parts) by one rank of each node of the group (a group over several nodes stores a block
// as one part-file a node: NODES.md, "The L3"). Every decision (which block to write, what to
// prefetch, when an L2 object is free again) is a function of replicated state and agreed values;
// the file I/O is the Env's, done by the block's one writer or reader on each node, and its
// completion reaches the group through the step consensus.

// L3WritePolicy says when a block goes from the L2 to the L3.
type L3WritePolicy int

const (
	L3WriteThrough L3WritePolicy = iota // once the L2 objects holding the whole block are committed
	L3WriteBack                         // when the L2 is about to evict an object of the block
)

var l3WritePolicyNames = []string{"write_through", "write_back"}

func (p L3WritePolicy) String() string { return l3WritePolicyNames[p] }

// PrefetchPolicy says how long a step waits for the L3 reads it issued before its consensus, as
// SGLang's --hicache-storage-prefetch-policy does: not at all, until every read is done, or until a
// deadline that grows with the tokens read (the deadline is the Env's: a read that outlives it ends
// as a failed read).
type PrefetchPolicy int

const (
	PrefetchBestEffort   PrefetchPolicy = iota // no wait: what is done at the consensus is used
	PrefetchWaitComplete                       // every read finishes first
	PrefetchTimeout                            // up to the read's deadline
)

var prefetchPolicyNames = []string{"best_effort", "wait_complete", "timeout"}

func (p PrefetchPolicy) String() string { return prefetchPolicyNames[p] }

// ParseL3WritePolicy reads --l3-write-policy.
func ParseL3WritePolicy(s string) (L3WritePolicy, error) {
	for i, name := range l3WritePolicyNames {
		if s == name {
			return L3WritePolicy(i), nil
		}
	}
	return 0, &errscope.ConfigError{
		Flag:   "l3-write-policy",
		Reason: fmt.Sprintf("%q is not one of write_through, write_back", s),
	}
}

// ParsePrefetchPolicy reads --l3-prefetch-policy.
func ParsePrefetchPolicy(s string) (PrefetchPolicy, error) {
	for i, name := range prefetchPolicyNames {
		if s == name {
			return PrefetchPolicy(i), nil
		}
	}
	return 0, &errscope.ConfigError{
		Flag:   "l3-prefetch-policy",
		Reason: fmt.Sprintf("%q is not one of best_effort, wait_complete, timeout", s),
	}
}

// L3Config is what the tier decides from.
type L3Config struct {
	Enabled        bool
	BlockTokens    int // tokens per block, a multiple of the page size
	WritePolicy    L3WritePolicy
	PrefetchPolicy PrefetchPolicy
	// a request prefetches only when at least this many of its tokens are not cached
	PrefetchThreshold int
	BatchRequests     int // the l3_prefetch vector's length: requests per step
	// tests only: validate's L3 row must catch it (the same as BugAttachFailedPrefetch)
	IgnoreFailedReads bool
}

// Validate refuses a block size that is not whole pages, a negative threshold and an empty batch.
func (o *L3Config) Validate(pageTokens int) error {
	if o.BlockTokens < pageTokens || o.BlockTokens%pageTokens != 0 {
		return &errscope.ConfigError{
			Flag: "l3-block-tokens",
			Reason: fmt.Sprintf(
				"%d is not a positive multiple of --page-tokens %d",
				o.BlockTokens,
				pageTokens,
			),
		}
	}
	if o.PrefetchThreshold < 0 {
		return &errscope.ConfigError{
			Flag:   "l3-prefetch-threshold",
			Reason: fmt.Sprintf("%d tokens is negative", o.PrefetchThreshold),
		}
	}
	if o.BatchRequests < 1 {
		return &errscope.ConfigError{
			Flag:   "batch-requests",
			Reason: fmt.Sprintf("%d must be 1 or more", o.BatchRequests),
		}
	}
	return nil
}

// prefetchBlockBits is the low part of the failed-prefetch word, the block index within its
// prefetch.
const prefetchBlockBits = 20

// maxPrefetchBlocks bounds one prefetch, so that its block index fits the failed-prefetch word.
const maxPrefetchBlocks = 1<<prefetchBlockBits - 1

// l3Tier is one rank's part of the L3: the block writes and prefetches in flight.
type l3Tier struct {
	cfg        L3Config
	pageTokens int
	// The rank's part of the L3's I/O: block b's file on each node is written, looked for and read
	// by the node's rank whose node-local part is b mod parts (block b is CP rank b mod cp's on a
	// group of one node).
	part, parts int
	// keeper: each node's part 0 keeps the byte budget of its node's block files; it learns every
	// block the group wrote (Env.Adopt).
	keeper bool

	// replicated, write_back: L2 objects whose blocks were scheduled
	backedUp map[pool.ObjectID]bool
	writes   []*l3Write // scheduled, not yet retired, ascending seq
	lastSeq  struct{ write, read, check uint64 }
	reads    []*l3Prefetch // prefetches not yet resolved, ascending seq
	open     []*l3Prefetch // prefetches not yet attached to the tree or given up (resolved or not)
	// Replicated, from agreed outcomes (prefetchRoom): consecutive failed prefetches, the step
	// before which none starts (backOff), and whether one has been read whole. A flush keeps them:
	// the L3 stays.
	failStreak int
	resumeStep int64
	proven     bool

	// Existence checks (l3exists.go): the next step's, by request, and every one in flight, by
	// sequence number. The keys they look for are replicated; their answers are this rank's. A
	// flush keeps them: the L3 stays.
	ahead  map[*workload.Request]*existenceCheck
	checks map[uint64]*existenceCheck
}

// l3Write is one block on its way from the L2 to the L3. Every rank holds it (its L2 objects stay
// protected until the group agrees it is done); only the writer rank does the I/O.
type l3Write struct {
	seq  uint64
	key  uint64
	objs []pool.ObjectID
	done bool
}

// l3Prefetch is the consecutive blocks of one request read from the L3 into one fresh L2 object.
// Every rank reserved the object; each block is read by one rank of each node (ownsBlock).
type l3Prefetch struct {
	seq        uint64
	obj        pool.ObjectID
	firstBlock int      // the first block's index in the prompt
	keys       []uint64 // one per block
	readsLeft  int      // this rank's reads not finished
	// the lowest block index (within the prefetch) whose read failed on this rank; -1 none
	failed int

	resolved bool // the group agreed its outcome
	okBlocks int  // blocks every rank read (agreed): the prefix the tree may use
	closed   bool // attached, given up or flushed: nothing more to do
}

func (p *l3Prefetch) done() bool { return p.readsLeft == 0 }

func newL3Tier(cfg L3Config, g pool.Geometry, nodePart int) *l3Tier {
	return &l3Tier{
		cfg:        cfg,
		part:       nodePart,
		parts:      g.NodeParts(),
		pageTokens: g.PageTokens,
		keeper:     nodePart == 0,
		backedUp:   map[pool.ObjectID]bool{},
		ahead:      map[*workload.Request]*existenceCheck{},
		checks:     map[uint64]*existenceCheck{},
	}
}

func (t *l3Tier) blockTokens() int { return t.cfg.BlockTokens }

// ownsBlock says whether this rank does the I/O of block index block (of the prompt) on its node.
func (t *l3Tier) ownsBlock(block int) bool { return block%t.parts == t.part }
func (t *l3Tier) blockPages() int          { return t.cfg.BlockTokens / t.pageTokens }

// complete records a finished block write or read of this rank.
func (t *l3Tier) complete(c *Core, x Completion) {
	switch x.Kind {
	case BlockWritten:
		for _, w := range t.writes {
			if w.seq == x.Seq {
				w.done = true
				if errors.Is(x.Err, ErrBlockMismatch) {
					c.counters.L3WriteMismatches++
				}
				return
			}
		}
		panic(c.broken("completion of L3 write %d, which is not scheduled", x.Seq))
	case BlockReadDone:
		p := t.prefetchBySeq(x.Seq)
		if p == nil || p.readsLeft == 0 {
			panic(
				c.broken("completion of a read of L3 prefetch %d, which has none in flight", x.Seq),
			)
		}
		p.readsLeft--
		if x.Err != nil && (p.failed < 0 || x.Block < p.failed) {
			p.failed = x.Block
		}
	}
}

// prefetchBySeq finds a prefetch whose reads may still be in flight: one not yet resolved.
func (t *l3Tier) prefetchBySeq(seq uint64) *l3Prefetch {
	for _, p := range t.reads {
		if p.seq == seq {
			return p
		}
	}
	return nil
}

// vote is what the tier brings to a consensus: the write frontier, and the prefetch frontier with
// the lowest failed read. The prefetch frontier stops at this rank's first failed prefetch, so that
// an agreed frontier holds at most one failed prefetch, the one the MIN of the failure words names
// (the others' frontiers stop at or before theirs): every rank learns every failure, one consensus
// at a time.
func (t *l3Tier) vote(v *vote) {
	v.storeFrontier = t.lastSeq.write
	for _, w := range t.writes {
		if !w.done {
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
		if p.failed >= 0 {
			v.prefetchFrontier, v.prefetchFailed = p.seq, p.seq<<prefetchBlockBits|uint64(p.failed)
			return
		}
	}
}

// idle says whether this rank has no L3 I/O in flight.
func (t *l3Tier) idle() bool {
	for _, w := range t.writes {
		if !w.done {
			return false
		}
	}
	return t.readsDone()
}

// readsDone says whether every prefetch read this rank started has finished. A prefetch stays in
// reads until the group agrees it done, so a given-up one is waited for too: its reads write into
// its object's slots.
func (t *l3Tier) readsDone() bool {
	for _, p := range t.reads {
		if !p.done() {
			return false
		}
	}
	return true
}

// writeBacklog says whether the writes in flight hold too much of the L2: the next consensus then
// waits for them, as throttleWrites waits for backups. Replicated: it counts scheduled writes, not
// finished ones.
func (t *l3Tier) writeBacklog(l2Slots int) bool {
	return len(t.writes)*t.blockPages() > l2Slots/4
}

// retireWrites ends the writes every rank finished: their L2 objects are free to go, and the keeper
// counts the blocks in its budget.
func (c *Core) retireWrites(upTo uint64) {
	t := c.l3
	agreed := upTo
	if c.cfg.Testing.Bugs.has(BugUnprotectBeforeStored) {
		upTo = t.lastSeq.write // the bug: as if every write were done
	}
	n := 0
	for n < len(t.writes) && t.writes[n].seq <= upTo {
		w := t.writes[n]
		if w.seq <= agreed && !w.done {
			panic(
				c.broken(
					"L3 write %d retired at the agreed storage frontier %d before it was done on this rank",
					w.seq,
					agreed,
				),
			)
		}
		for _, obj := range w.objs {
			if err := c.alloc.Unprotect(obj); err != nil {
				c.fail(
					FailureAllocator,
					fmt.Errorf("unprotect L2 object %d after its L3 write: %w", obj, err),
				)
			}
		}
		if t.keeper {
			c.env.Adopt(w.key)
		}
		n++
	}
	t.writes = t.writes[n:]
}

// resolvePrefetches records the agreed outcome of every prefetch up to the agreed frontier: all its
// blocks, or those before the lowest failed one. A prefetch already given up (its request served
// without it) gives back its L2 object now that no read can touch it.
func (c *Core) resolvePrefetches(upTo, failed uint64) {
	t := c.l3
	n := 0
	for n < len(t.reads) && t.reads[n].seq <= upTo {
		p := t.reads[n]
		if p.resolved || (n > 0 && t.reads[n-1].seq >= p.seq) {
			panic(
				c.broken(
					"L3 prefetch %d resolved twice (%v) or out of order at the agreed frontier %d",
					p.seq,
					p.resolved,
					upTo,
				),
			)
		}
		p.resolved, p.okBlocks = true, len(p.keys)
		c.env.Prefetch(p.seq, true)
		ignore := t.cfg.IgnoreFailedReads || c.cfg.Testing.Bugs.has(BugAttachFailedPrefetch)
		if failed != noFailure && failed>>prefetchBlockBits == p.seq && !ignore {
			p.okBlocks = int(failed & (1<<prefetchBlockBits - 1))
			c.counters.L3PrefetchMisses++
			t.backOff(c.step)
		} else {
			t.failStreak, t.proven = 0, true
		}
		if p.closed {
			c.abortPrefetch(p)
		}
		n++
	}
	t.reads = t.reads[n:]
}

// abortPrefetch gives back a prefetch's L2 object, which nothing points to.
func (c *Core) abortPrefetch(p *l3Prefetch) {
	if err := c.alloc.Abort(p.obj); err != nil {
		c.fail(
			FailureAllocator,
			fmt.Errorf("abort the L2 object %d of L3 prefetch %d: %w", p.obj, p.seq, err),
		)
	}
}

// reset forgets what a flush wiped from the L2: the writes and prefetches (settled by the flush)
// and the write_back marks. Prefetches whose requests had not been served yet are counted: their
// reads were wasted. The L3 itself, and what the group knows is in it, stay.
func (t *l3Tier) reset(c *Core) {
	for _, p := range t.open {
		if !p.closed {
			c.counters.L3PrefetchFlushed++
		}
		p.closed = true
	}
	t.writes, t.reads, t.open = t.writes[:0], t.reads[:0], t.open[:0]
	clear(t.backedUp)
}
