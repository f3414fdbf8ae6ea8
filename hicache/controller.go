package hicache

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
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
	return 0, &spmd.ConfigError{Flag: "write-policy", Reason: fmt.Sprintf("%q is not one of write_through, write_through_selective, write_back", s)}
}

// CacheConfig sizes one rank's cache.
type CacheConfig struct {
	Geometry    pool.Geometry // the CP group's shared L2
	DevicePages int           // this rank's L1 capacity in pages
	Policy      WritePolicy
	Seed        uint64 // of the KV content
}

// Counters are one rank's tallies. Cache decisions are replicated, so the hit and backup counters are the same on
// every rank of a CP group; bytes and verification are per rank.
type Counters struct {
	Requests, L1HitTokens, L2HitTokens, MissTokens  int64
	L3HitTokens                                     int64 // L2 hits on blocks prefetched from the L3 for them
	BackupReserved, BackupCommitted, ReserveMisses  int64
	L2Evictions, L1Evictions, LoadBacks, Uncached   int64
	BytesD2H, BytesH2D, PagesChecked, Mismatches    int64
	Flushes, PlacementChecks, Divergences, CopyErrs int64

	WriteThrottles                int64 // steps whose consensus first drained backups pinning over half of L1
	AuditObjects, AuditMismatches int64 // committed objects audited whole (every rank's parts), and those wrong
	// IdealHitTokens is the replica's prompt tokens an unbounded cache would hit (workload.IdealHitTokens), known
	// on CP rank 0, which reads the workload: the report sums it like the replicated counters.
	IdealHitTokens int64

	// The L3's: its I/O per rank (the writer or reader rank of each block does it), and what the group decided.
	L3Writes, L3WriteBytes, L3WriteErrors, L3Reads, L3ReadBytes, L3ReadFailures, L3Corrupt, L3Evictions int64
	L3Prefetches, L3PrefetchBlocks, L3PrefetchMisses, L3PrefetchTimeouts                                int64

	// consensus calls, copied from the consensus statistics for the report (consensusTallies)
	consensusCalls, consensusStepCalls, consensusSkipped int64
	l3PrefetchCalls                                      int64 // l3_prefetch calls (the L3's one more per serving step)
	DivergenceFirstStep                                  int64 // validate: the step of the first assert that caught a divergence
	FlushWrong                                           int64 // flushes after which the allocator differed from a fresh one
	ObjectsCompared, ObjectsWrong                        int64 // validate: per-object placement comparisons across the CP group
}

// evictionCheck (tests only) checks the nodes one L1 eviction chose, in order, and how many pages it freed of
// how many it needed.
type evictionCheck func(chosen []*treeNode, freedPages, needPages int) error

// copyQueueTasks bounds the copies (one layer of one op each) queued for the copy worker. When the worker falls
// behind, submitting blocks the step until it catches up: backpressure, as a full copy stream gives a serving
// engine, instead of an unbounded backlog of pinned device pages. It is a timing matter only: decisions depend on
// what writing_check commits, which every rank agrees on.
const copyQueueTasks = 64

// controller is one rank's cache: the radix tree over its device pages, the shared L2 allocator, and the copy
// ops in flight. Every decision it makes is a pure function of the event stream; only copy completion differs
// between ranks, and that is reconciled by the consensus collectives.
type controller struct {
	cfg        CacheConfig
	cpRank     int
	alloc      *pool.Allocator
	tree       *radixTree
	evictq     *evictQueue // L1 eviction candidates, oldest first
	dev        *devicePool
	engine     copyEngine
	cons       *consensus
	l3         *l3Tier // nil without --l3-dir
	tasks      chan copyTask
	workerDone chan struct{}
	writes     opQueue
	loads      opQueue
	nextSeq    uint64 // backup and load sequence numbers share one counter; each queue sees its own subsequence
	clock      uint64 // logical time: one tick per request

	objectNodes map[pool.ObjectID][]*treeNode // nodes that point into each L2 object (lookup only)
	work        stepWork                      // what the current step's requests hold
	counters    Counters
	failure     error           // this rank's failure, for the group's next consensus (fail)
	slabs       [][]byte        // the shared L2, read by the commit audit
	auditHeld   []pool.ObjectID // committed at the last consensus, protected until this one (holdForAudit)

	freshStateHash   uint64 // the allocator's state hash when it was built: what every flush must restore
	recordFlushWrong bool   // validate: a flush that leaves the cache unlike a fresh one is counted, not fatal

	// testCommitOnLocalFrontier (tests only) commits on this rank's own write frontier instead of the group's MIN:
	// the bug the commit audit exists to catch.
	testCommitOnLocalFrontier bool
	// testAssertOff (tests only) turns the placement assert off, digest and objects, to show what the audit
	// catches alone.
	testAssertOff bool
	// testEvictionModel (tests only), when set, is called at the start of every L1 eviction and returns the check
	// of the nodes that eviction then chooses: the queue's order against a walk and sort of the tree.
	testEvictionModel func(c *controller) evictionCheck

	partBytes int64
	partBuf   []byte // one part's content, for filling and verifying
}

func newController(cfg CacheConfig, cpRank int, engine copyEngine, slabs [][]byte, cons *consensus) (*controller, error) {
	alloc, err := pool.New(cfg.Geometry)
	if err != nil {
		return nil, err
	}
	g := cfg.Geometry
	c := &controller{
		cfg: cfg, cpRank: cpRank, alloc: alloc, tree: newRadixTree(g.PageTokens), dev: newDevicePool(cfg.DevicePages),
		engine: engine, cons: cons, tasks: make(chan copyTask, copyQueueTasks), objectNodes: map[pool.ObjectID][]*treeNode{},
		partBytes: g.PartBytes(), slabs: slabs, freshStateHash: alloc.StateHash(),
		writes: opQueue{name: "backup"}, loads: opQueue{name: "load-back"},
	}
	c.partBuf = make([]byte, c.partBytes)
	c.tree.onSplit = c.noteSplit
	c.evictq = newEvictQueue(c.tree)
	c.workerDone = make(chan struct{})
	go func() {
		copyWorker(engine, c.tasks)
		close(c.workerDone)
	}()
	return c, nil
}

// close stops the copy worker after it has run the copies already queued, so that no copy touches the slab
// after it is unmapped.
func (c *controller) close() {
	close(c.tasks)
	<-c.workerDone
}

func (c *controller) geometry() pool.Geometry { return c.cfg.Geometry }

// deviceOffset is where (page, layer, payload) lives in the device KV buffer: [layer][payload][page], so the
// pages of one layer and payload are contiguous, as in a per-layer KV buffer of a serving engine.
func (c *controller) deviceOffset(page int32, layer, payload int) int64 {
	g := c.geometry()
	return ((int64(layer)*int64(g.PayloadsPerLayer)+int64(payload))*int64(c.dev.capacity()) + int64(page)) * c.partBytes
}

// DeviceBytes is the size of a rank's device KV buffer for this configuration.
func (cfg CacheConfig) DeviceBytes() int64 {
	g := cfg.Geometry
	return int64(g.Layers) * int64(g.PayloadsPerLayer) * int64(cfg.DevicePages) * g.PartBytes()
}

// spansFor builds, per layer, the copies between the node's device pages and its pages of the L2 object, in
// page order; kernels coalesce consecutive ones.
func (c *controller) spansFor(obj pool.ObjectID, objOffset int, devicePages []int32) ([][]kernels.Span, error) {
	g := c.geometry()
	spans := make([][]kernels.Span, g.Layers)
	for layer := range spans {
		spans[layer] = make([]kernels.Span, 0, len(devicePages)*g.PayloadsPerLayer)
	}
	err := c.eachPageSlot(obj, objOffset, len(devicePages), func(i, slab, slot int) {
		for layer := 0; layer < g.Layers; layer++ {
			for payload := 0; payload < g.PayloadsPerLayer; payload++ {
				spans[layer] = append(spans[layer], kernels.Span{
					DeviceOffsetBytes: c.deviceOffset(devicePages[i], layer, payload),
					Slab:              int32(slab),
					SlabOffsetBytes:   g.PartOffset(slab, slot, c.cpRank, layer, payload),
					Bytes:             c.partBytes,
				})
			}
		}
	})
	return spans, err
}

// eachPageSlot visits pages [first, first+count) of an L2 object in page order: visit gets the index from first,
// and the slab and slot in it. Fewer pages than that in the object is an error.
func (c *controller) eachPageSlot(obj pool.ObjectID, first, count int, visit func(i, slab, slot int)) error {
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
		return fmt.Errorf("L2 object %d has %d pages, not pages %d..%d", obj, page, first, first+count-1)
	}
	return nil
}

// submit queues every layer of op on the copy worker. A full queue blocks the step until the worker catches up,
// under the watchdog's drain slot: a worker stuck on a copy must not hold the step forever.
func (c *controller) submit(op *copyOp, gather bool) {
	op.layersLeft.Store(int32(len(op.spans)))
	for layer := range op.spans {
		task := copyTask{op: op, layer: layer, gather: gather}
		select {
		case c.tasks <- task:
		default:
			c.cons.watchdog.ArmDrain("copy queue", "the copy worker of this rank stopped taking copies", c.cons.group, c.cons.cp.Size(), c.cons.step)
			c.tasks <- task
			c.cons.watchdog.DisarmDrain()
		}
	}
}

func opErr(op *copyOp) error {
	if p := op.err.Load(); p != nil {
		return *p
	}
	return nil
}

// errCopy wraps a failed page copy; the run ends on it.
var errCopy = errors.New("page copy failed")
