package cache

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// WritePolicy says when a node's KV is backed up to L2.
type WritePolicy int

const (
	WriteThrough          WritePolicy = iota // on first insert
	WriteThroughSelective                    // on the second hit
	WriteBack                                // only when evicted from L1
)

var writePolicyNames = []string{"write_through", "write_through_selective", "write_back"}

func (p WritePolicy) String() string { return writePolicyNames[p] }

// ParseWritePolicy reads --write-policy.
func ParseWritePolicy(s string) (WritePolicy, error) {
	for i, name := range writePolicyNames {
		if s == name {
			return WritePolicy(i), nil
		}
	}
	return 0, &errscope.ConfigError{
		Flag: "write-policy",
		Reason: fmt.Sprintf(
			"%q is not one of write_through, write_through_selective, write_back",
			s,
		),
	}
}

// Config is one rank's cache and the run it takes part in: everything Run decides from, besides the
// events.
type Config struct {
	Geometry    pool.Geometry // the CP group's shared L2
	DevicePages int           // this rank's L1 capacity in pages
	Policy      WritePolicy
	Seed        uint64 // of the KV content
	CPRank      int
	Group       int // the CP group, for messages
	// With Geometry.Nodes > 1 (a group over several nodes): this rank's node among the group's, and
	// its part index in that node's slab (NodePlacement). Ignored on one node, where the part is
	// the CP rank.
	GroupNode, NodePart int

	L3 L3Config // off unless L3.Enabled

	SyncCopies bool  // every step's consensus drains the backups (sweep, --sync-copies)
	FlushEvery int64 // steps between flushes; 0 = only the workload's
	// steps between object-by-object comparisons; 0 = at flushes and the end
	PlacementAssertEvery int64
	// --inject-divergence on this rank: perturb the allocator after this step's consensus; 0 =
	// never
	PerturbAtStep int64

	// validate: record a divergence and start the group again from a fresh state
	RecordDivergence bool
	// validate: a flush that leaves the cache unlike a fresh one is counted, not fatal
	RecordFlushWrong bool
	FlushAtEnd       bool // validate: flush once at the end when the workload had no flush

	Testing Testing // what the tests and the simulator attach (testing.go); a run leaves it zero
}

// Outcome is what one request's serve decided, in tokens.
type Outcome struct{ L1Hit, L2Hit, L3Hit, Computed int64 }

// Served is one request of a step as its serve left it: replicated, the same on every rank of the
// group.
type Served struct {
	Request *workload.Request
	Outcome
}

// ServedStep is a step whose requests have been served (their load-backs started, their KV
// computed), told to the Env before the step's consensus: a serving clock spends the step's
// modelled compute now, beside the copies. LoadsDone says whether this rank's load-backs have all
// finished: the modelled prefill needs them first.
type ServedStep struct {
	Step      int64
	Requests  []Served
	LoadsDone func() bool
}

// Core is one rank's cache: the radix tree over its device pages, the shared L2 allocator, the
// copies and L3 I/O in flight, and the step program that drives them (Run). Every decision it makes
// is a pure function of the event stream and of agreed values; what differs between ranks (when
// work finishes) reaches it only through Complete, and is reconciled by the step consensus. It owns
// no goroutine, clock, file, communicator or logger: all of that is its Env's.
type Core struct {
	cfg     Config
	env     Env
	alloc   *pool.Allocator
	tree    *radixTree
	evictq  *evictQueue // L1 eviction candidates, oldest first
	dev     *devicePool
	l3      *l3Tier // nil without an L3
	writes  opQueue
	loads   opQueue
	nextSeq uint64 // backup, load and prefetch object sequence numbers share one counter
	clock   uint64 // logical time: one tick per request
	step    int64  // the step in progress
	calls   uint64 // consensus calls entered on this CP communicator: the counter of the tag

	objectNodes map[pool.ObjectID][]*treeNode // nodes that point into each L2 object (lookup only)
	// copies started and not yet complete, by seq (lookup only)
	inFlight map[uint64]*copyOp
	work     stepWork // what the current step's requests hold
	counters Counters
	failure  error // this rank's failure, for the group's next consensus (Fail)
	// committed at the last consensus, protected until this one (holdForAudit)
	auditHeld []pool.ObjectID
	// the backups left after a step pin over half of L1: the next consensus drains them
	drainNext bool
	oversize  bool // the request being served has more whole pages than L1 holds
	deferred  []deferredRequest
	// the next step's events (Run reads the stream a step ahead); nil after the last
	next   []workload.Event
	served []Served // this step's requests as served, for ServedStep

	// Testing.CheckEvictions: the model every L1 eviction is compared with
	evictionModel func(c *Core) evictionCheck
	// the allocator's state hash when it was built: what every flush must restore
	freshStateHash uint64
	vector         []uint64 // the consensus vector, StepVectorWords long
}

// New builds a rank's cache for cfg; env is the world around it.
func New(cfg Config, env Env) (*Core, error) {
	alloc, err := pool.New(cfg.Geometry)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkNodes(); err != nil {
		return nil, err
	}
	c := &Core{
		cfg: cfg, env: env, alloc: alloc, tree: newRadixTree(cfg.Geometry.PageTokens),
		dev:         newDevicePool(cfg.DevicePages),
		objectNodes: map[pool.ObjectID][]*treeNode{}, inFlight: map[uint64]*copyOp{}, freshStateHash: alloc.StateHash(),
		writes: opQueue{name: "backup"}, loads: opQueue{name: "load-back"},
	}
	c.tree.onSplit = c.noteSplit
	c.evictq = newEvictQueue(c.tree)
	c.evictq.tieHigh = cfg.Testing.Bugs.has(BugTieBreakOnRank) && cfg.CPRank == 1
	c.breakPolicy()
	if cfg.Testing.CheckEvictions {
		c.evictionModel = walkEvictionModel
	}
	if cfg.L3.Enabled {
		if err := cfg.L3.Validate(cfg.Geometry.PageTokens); err != nil {
			return nil, err
		}
		c.l3 = newL3Tier(cfg.L3, cfg.Geometry, c.nodePart())
	}
	return c, nil
}

func (c *Core) geometry() pool.Geometry { return c.cfg.Geometry }

// Counters returns this rank's tallies so far.
func (c *Core) Counters() Counters { return c.counters }

// Step is the step in progress (or the last one).
func (c *Core) Step() int64 { return c.step }

// Fail records a failure of this rank's surroundings (a metrics write, say) for the group's next
// consensus.
func (c *Core) Fail(code FailureCode, err error) { c.fail(code, err) }

// DeviceBytes is the size of a rank's device KV buffer for a geometry and L1 size.
func DeviceBytes(g pool.Geometry, devicePages int) int64 {
	return int64(g.Layers) * int64(g.PayloadsPerLayer) * int64(devicePages) * g.PartBytes()
}

// slotsOf lists where pages [first, first+count) of an L2 object live, in page order.
func (c *Core) slotsOf(obj pool.ObjectID, first, count int) ([]SlabSlot, error) {
	slots := make([]SlabSlot, 0, count)
	err := c.eachPageSlot(obj, first, count, func(_, slab, slot int) {
		slots = append(slots, SlabSlot{Slab: int32(slab), Slot: int32(slot)})
	})
	return slots, err
}

// eachPageSlot visits pages [first, first+count) of an L2 object in page order: visit gets the
// index from first, and the slab and slot in it. Fewer pages than that in the object is an error.
func (c *Core) eachPageSlot(
	obj pool.ObjectID,
	first, count int,
	visit func(i, slab, slot int),
) error {
	extents, ok := c.alloc.Extents(obj)
	if !ok {
		return fmt.Errorf("L2 object %d has no placement", obj)
	}
	page := 0 // index within the object
	for _, e := range extents {
		for s := range int(e.Slots) {
			if i := page - first; i >= 0 && i < count {
				visit(i, int(e.Slab), int(e.FirstSlot)+s)
			}
			page++
		}
	}
	if page < first+count {
		return fmt.Errorf(
			"L2 object %d has %d pages, not pages %d..%d",
			obj,
			page,
			first,
			first+count-1,
		)
	}
	return nil
}

// startCopy hands a copy to the Env and keeps it in flight until its completion comes back.
func (c *Core) startCopy(op *copyOp, gather bool) {
	if c.inFlight[op.seq] != nil || len(op.devicePages) != len(op.slots) {
		panic(
			c.broken(
				"copy %d started twice, or of %d device pages into %d slots",
				op.seq,
				len(op.devicePages),
				len(op.slots),
			),
		)
	}
	c.inFlight[op.seq] = op
	c.env.Start(
		&Copy{
			Seq:         op.seq,
			Gather:      gather,
			Object:      uint64(op.obj),
			DevicePages: op.devicePages,
			Slots:       op.slots,
		},
	)
}

// Complete is told that a piece of work finished. It only records the fact: what follows from it is
// decided at the next consensus, from what every rank brings.
func (c *Core) Complete(x Completion) {
	switch x.Kind {
	case CopyDone:
		op := c.inFlight[x.Seq]
		if op == nil {
			panic(c.broken("completion of copy %d, which is not in flight", x.Seq))
		}
		delete(c.inFlight, x.Seq)
		op.isDone, op.err = true, x.Err
	case BlocksFound:
		if c.l3 == nil {
			panic(c.broken("an L3 completion without an L3"))
		}
		c.l3.checkDone(x)
	case BlockWritten, BlockReadDone:
		if c.l3 == nil {
			panic(c.broken("an L3 completion without an L3"))
		}
		c.l3.complete(c, x)
	}
}

// errCopy wraps a failed page copy; the run ends on it.
var errCopy = errors.New("page copy failed")

// ErrBlockMismatch is a BlockWrite's error when the gathered parts were not the block's content:
// the block was not published, and the run fails as on an audit mismatch.
var ErrBlockMismatch = errors.New("the L2 parts of an L3 block were not its content: not published")
