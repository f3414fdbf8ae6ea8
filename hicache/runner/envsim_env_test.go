package runner

import (
	"fmt"
	"math/rand/v2"
	"sync"

	"github.com/cphicache/cphicache/hicache/cache"
)

// Each rank's Env under simulation is the runner's own (runState), every call passed on to it, seen
// on the way by the harness's models: the harness's own record of what each group backed up,
// audited, looked for in the L3, read and wrote, which the runner's work is checked against, not
// its counters alone (SIMULATOR.md, "The runner under simulation"): the audit's coverage
// (envsim_audit_test.go), the existence checks and reads under ranks whose views of the L3 differ
// (envsim_views_test.go), and the moment of each write_back write (envsim_writeback_test.go).

// simEnv is one rank's Env: the runner's, and what the models keep of this rank.
type simEnv struct {
	*runState
	e     *envSim
	world int
	node  int
	m     *groupModel // its group's
	// the audit probe's shadow of this node's slab, and its draws (envsim_audit_test.go)
	shadow [][]byte
	rng    *rand.Rand
	audits int64 // the Audit calls the core made on this rank
	probes int64 // of them, those probed part by part
	// write_back: the slots of the objects about to be evicted at this rank's last consensus
	evicting   map[cache.SlabSlot]bool
	writeBacks int64 // write_back writes that touched such a slot
}

var _ cache.Env = (*simEnv)(nil)

// groupModel is what the harness records of one CP group, from every rank of it (each rank's calls
// come on its own step goroutine, hence the lock).
type groupModel struct {
	mu sync.Mutex
	// by backup seq: what its copies wrote (the same on every rank), and the nodes that audited it
	backups map[uint64]backupRecord
	audited map[uint64][]int
	// by L2 object: what its audit says it holds (write_back's near-eviction pass)
	objects map[uint64]auditedObject
	// by existence check seq: each CP rank's look (nil: not started on it yet)
	checks map[uint64][]*checkRecord
	// the blocks that must be written by the end, by blockID, with their tokens' span; and written
	mustWrite map[uint64][2]int
	wrote     map[uint64]bool
}

// backupRecord is a backup as its copies were started: its object and its slots, page by page.
type backupRecord struct {
	object uint64
	slots  []cache.SlabSlot
}

// auditedObject is what a committed backup's audit says its L2 object holds.
type auditedObject struct {
	startPos int
	tokens   []int32
}

func newGroupModel() *groupModel {
	return &groupModel{
		backups:   map[uint64]backupRecord{},
		audited:   map[uint64][]int{},
		objects:   map[uint64]auditedObject{},
		checks:    map[uint64][]*checkRecord{},
		mustWrite: map[uint64][2]int{},
		wrote:     map[uint64]bool{},
	}
}

// newSimEnv wraps rank world's runState (node: its node in the group) for the harness's models.
func (e *envSim) newSimEnv(rs *runState, world, node int, m *groupModel) *simEnv {
	return &simEnv{
		runState: rs,
		e:        e,
		world:    world,
		node:     node,
		m:        m,
		rng:      rand.New(rand.NewPCG(e.job.seed, 0xa0d17+uint64(world))),
		evicting: map[cache.SlabSlot]bool{},
	}
}

// Start records what the models need of a piece of work, checks a read and a write against them,
// and hands it to the runner.
func (v *simEnv) Start(w cache.Work) {
	switch w := w.(type) {
	case *cache.Copy:
		if w.Gather {
			v.backedUp(w)
		}
	case *cache.ExistenceCheck:
		v.lookedFor(w)
	case *cache.BlockRead:
		v.reads(w)
	case *cache.BlockWrite:
		v.writes(w)
	}
	v.runState.Start(w)
}

// Audit is the runner's audit, its coverage then probed (envsim_audit_test.go).
func (v *simEnv) Audit(a *cache.Audit) bool {
	ok := v.runState.Audit(a)
	v.audited(a, ok)
	return ok
}

// backedUp records a backup as its copy starts: every rank starts the same.
func (v *simEnv) backedUp(c *cache.Copy) {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	if _, ok := v.m.backups[c.Seq]; !ok {
		v.m.backups[c.Seq] = backupRecord{object: c.Object, slots: c.Slots}
	}
}

// violate records a violation of the harness's models, seen during the job: the job's end adds
// them to its own (the first few: a bug repeats its violation at every chance).
func (e *envSim) violate(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.modelViolations) < 4 {
		e.modelViolations = append(e.modelViolations, fmt.Sprintf(format, args...))
	}
}
