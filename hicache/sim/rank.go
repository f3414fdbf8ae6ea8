package sim

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/workload"
)

// rank is one simulated rank: its core, and the core's Env over the group's simulated memory, the
// job's simulated directory and the scheduler. Its step program runs as a coroutine: every Env call
// that would block on a real rank (the step broadcast, a collective, a local wait) yields to the
// scheduler instead.
type rank struct {
	g     *group
	cp    int
	node  int // the group's node that holds this rank's parts
	core  *cache.Core
	next  func() (struct{}, bool)
	stop  func()
	yield func(struct{}) bool

	state      rankState
	coll       *cache.Collective
	collDone   bool
	bcastStep  int64
	waitReason cache.WaitReason
	// copies, block writes, block reads, existence checks (queueWidth says how many run at once)
	queues    [queueKinds][]*pending
	completed []cache.Completion
	steps     int64
	since     uint64 // the tick it began its present wait (the watchdog's)
	stoppedAt int64  // the step it stopped at (FaultStop)
	err       error
	panicked  any

	// this rank's L3 store, on its view of the job's directory; nil without an L3
	store    *l3.Store
	readBuf  []byte
	writeBuf []byte

	// the L3 keys this rank's existence checks ever found: the only blocks it may be agreed to read
	foundKeys map[uint64]bool

	failNext, stickNext bool // armed faults: this rank's next copy fails, or never completes
	outcomes            []cache.Outcome
	stepLoads           pageTally // this step's load-back pages, by where their bytes came from
	lastPrefetch        uint64    // the last L3 prefetch this rank started (provenance.go)
	// write_back (writeback.go): the slots of the objects about to be evicted at this rank's last
	// consensus
	evictingSlots map[cache.SlabSlot]bool
	clock         *rankClock // a serving-clock job's (clockrank.go); nil in the others
}

type rankState int

const (
	stNew      rankState = iota
	stRunning            // resumed, not yet blocked
	stBcast              // waiting for CP rank 0's step broadcast
	stColl               // in a collective
	stWait               // in a local wait
	stStopped            // stopped forever (FaultStop): silent
	stFinished           // Run returned
)

var stateNames = [...]string{
	"new",
	"running",
	"in the step broadcast",
	"in a collective",
	"in a local wait",
	"stopped",
	"finished",
}

const (
	queueCopies = iota
	queueWrites
	queueReads
	queueChecks
	queueKinds
)

// queueWidth is how many of a queue's first entries may complete, in any order, as the runner's
// workers do: one copy worker (copies complete in order), and a few L3 writers and readers
// (hicache/runner/l3io.go's l3Writers and l3Readers; existence checks run on the readers).
var queueWidth = [queueKinds]int{queueCopies: 1, queueWrites: 2, queueReads: 4, queueChecks: 4}

// errAborted ends a rank's program when the scheduler stops the job.
var errAborted = errors.New("sim: job stopped")

// errExited is what a rank that leaves (FaultExit) returns.
var errExited = errors.New("sim: injected exit")

func (r *rank) block(s rankState) bool {
	r.state, r.since = s, r.g.j.now
	return r.yield(struct{}{})
}

// NextStep is CP rank 0's broadcast: rank 0 sends and goes on; the others receive once it has sent.
func (r *rank) NextStep(step int64) ([]workload.Event, error) {
	g := r.g
	if r.cp == 0 {
		if r.clock != nil {
			r.formStep(step)
		} else {
			g.sent[step] = g.j.cfg.takeStep(&g.events, step)
		}
		g.sentUpTo = step
	}
	for g.sentUpTo < step {
		r.bcastStep = step
		if !r.block(stBcast) {
			return nil, errAborted
		}
	}
	r.armFaults(step - 1) // the core reads a step ahead: step-1 begins now
	if r.stopsAt(step - 1) {
		r.fired()
		r.g.j.stalled = true
		r.stoppedAt = step - 1
		for r.block(stStopped) {
		}
		return nil, errAborted
	}
	if r.clock != nil {
		return r.stepOnClock(step), nil
	}
	batch := g.sent[step]
	if batch == nil {
		return nil, nil
	}
	return append(
		[]workload.Event(nil),
		batch...), nil // each rank's own slice: the core keys requests by address
}

func (r *rank) armFaults(step int64) {
	j := &r.g.j.cfg
	if r.g.index != 0 || r.cp != j.FaultRank || step != j.FaultStep {
		return
	}
	switch j.Fault {
	case FaultCopyError:
		r.failNext = true
	case FaultStuckCopy:
		r.stickNext = true
	}
}

// Collective arrives at the group's collective and waits until every rank has.
func (r *rank) Collective(c *cache.Collective) error {
	j := &r.g.j.cfg
	if j.Fault == FaultExit && r.g.index == 0 && r.cp == j.FaultRank &&
		c.Kind == cache.StepConsensus &&
		c.Step == j.FaultStep {
		r.fired()
		return errExited
	}
	r.coll, r.collDone = c, false
	r.g.arrive(r)
	for !r.collDone {
		if !r.block(stColl) {
			return errAborted
		}
	}
	return nil
}

// Start hands work to the scheduler, which completes it later, in order per queue; it first checks
// the reference rule against every rank's work in flight.
func (r *rank) Start(w cache.Work) {
	j := r.g.j
	p := &pending{work: w, rank: r, readyAt: j.now + j.delay()}
	q := queueCopies
	switch w := w.(type) {
	case *cache.Copy:
		p.writes = w.Gather
		p.parts = r.g.partsOf(w.Slots, r.cp, r.node)
		if !w.Gather {
			r.loadedBack(w)
		}
		r.copied(w)
		p.fail, p.stuck = r.failNext, r.stickNext
		if r.failNext || r.stickNext {
			r.fired()
		}
		r.failNext, r.stickNext = false, false
	case *cache.BlockWrite:
		q = queueWrites
		r.writesOnce(w)
		r.writesBack(w)
		p.parts = r.g.partsOf(w.Pages, -1, r.node)
	case *cache.BlockRead:
		q = queueReads
		if !r.foundKeys[w.Key] {
			j.violate(r, fmt.Sprintf("the L3 read of block %d of prefetch %d (key %016x) on CP rank %d, its reader, which no existence check of its found: the group's count is not the MIN of its readers' answers",
				w.Block, w.Prefetch, w.Key, r.cp))
		}
		r.readStarted(w)
		r.g.readPages(w)
		p.writes = true
		p.parts = r.g.partsOf(w.Pages, -1, r.node)
		p.hung = j.l3.r.chance(j.l3.f.HungReadPerMille)
		if j.cfg.L3.PrefetchPolicy != cache.PrefetchWaitComplete {
			p.deadline = j.now + uint64(4*j.cfg.LateTicks)
		}
	case *cache.ExistenceCheck:
		q = queueChecks
		r.g.checkStarted(w)
	}
	if q != queueCopies && r.hangs() {
		// a read with a deadline is given up at it; the rest hang forever
		p.hung, p.stuck = true, p.deadline == 0
		r.fired()
		r.g.j.stalled = r.g.j.stalled ||
			q == queueWrites // every write is waited for before the job ends
	}
	r.g.reference(p)
	r.queues[q] = append(r.queues[q], p)
}

// Wait delivers completions until done holds, yielding while it does not.
func (r *rank) Wait(reason cache.WaitReason, done func() bool) error {
	for {
		r.Poll()
		if done() {
			return nil
		}
		r.waitReason = reason
		if !r.block(stWait) {
			return errAborted
		}
	}
}

// Poll hands the core what the scheduler completed.
func (r *rank) Poll() {
	done := r.completed
	r.completed = nil
	for _, x := range done {
		r.core.Complete(x)
	}
	if r.clock != nil {
		r.clock.polled()
	}
}

// StepDone records the rank's state hash for the group's check, and lets another job touch the
// directory.
func (r *rank) StepDone(step int64) {
	r.steps = step
	if r.clock != nil {
		r.clock.ended(step)
	}
	r.g.reportHash(r, step, r.core.StateHash())
	if r.g.j.cfg.Recordless && r.g.index == 0 {
		r.g.reportPlacements(r, step)
	}
	if r.g.index == 0 && r.cp == 0 && r.g.j.l3 != nil {
		r.g.j.l3.otherJob()
	}
}

// BeginStep and Served pace a serving clock's steps in a real run; the simulator's time is its
// scheduler's, and Served checks the step's hits by tier against the pages it loaded back
// (provenance.go). A serving-clock job's ranks keep their clocks by them (clockrank.go).
func (r *rank) BeginStep(step int64) {
	if r.clock != nil {
		r.clock.begin(step)
	}
}

func (r *rank) Served(s *cache.ServedStep) {
	r.servedFrom(s)
	if r.clock != nil {
		r.clock.served(s)
	}
}

func (r *rank) Prefetch(seq uint64, resolved bool) { r.prefetchNoticed(seq, resolved) }

func (r *rank) Fill(f *cache.Fill) error {
	r.g.mem.Fill(r.cp, f)
	r.recomputed(f)
	r.filled(f)
	return nil
}

func (r *rank) VerifyLoad(v *cache.Verify) (int64, int64, error) {
	checked, bad := r.g.mem.Verify(r.cp, v)
	if bad > 0 {
		r.g.j.violate(
			r,
			fmt.Sprintf("load-back %d: %d of %d pages had a wrong byte", v.Seq, bad, checked),
		)
	}
	return checked, bad, nil
}

// Audit checks the parts the core asked for in this rank's node's slab; asking for fewer than every
// part the node holds is itself a violation, and so is a committed object that some node of the
// group never audits (group.checkAudits).
func (r *rank) Audit(a *cache.Audit) bool {
	if parts := r.g.j.cfg.Geometry.NodeParts(); a.Parts != parts {
		r.g.j.violate(
			r,
			fmt.Sprintf(
				"the audit of L2 object %d checks %d of the %d parts on node %d",
				a.Object,
				a.Parts,
				parts,
				r.node,
			),
		)
	}
	r.g.audited[a.Seq] = append(r.g.audited[a.Seq], r.node)
	r.g.committedWhole(a)
	r.g.auditedWriteBack(a)
	ok := r.g.mem.NodeSlotsMatch(r.node, a.Slots, a.Tokens, a.StartPos, a.Parts)
	if !ok {
		r.g.j.violate(
			r,
			fmt.Sprintf(
				"the audit of L2 object %d (backup %d) found a wrong byte in the shared slab",
				a.Object,
				a.Seq,
			),
		)
	}
	return ok
}

func (r *rank) Adopt(key uint64) { r.store.Adopt(key) }

var _ cache.Env = (*rank)(nil)
