package sim

import (
	"errors"
	"fmt"
	"iter"
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// job is one simulated job: its CP groups, the directory they share, and the scheduler's clock.
type job struct {
	cfg JobConfig
	// where each group's ranks are over its nodes (cfg.placement, drawn once)
	placement cache.NodePlacement
	r         *rng   // scheduling and timing
	l3        *simL3 // nil without an L3
	groups    []*group
	now       uint64 // scheduler ticks
	violation *Violation
	// how the job ended when nothing could move (the watchdog's view), "" when it ran to its end
	stuck        string
	readsGivenUp int64  // L3 reads the scheduler ended at their deadline
	firedAt      uint64 // the tick the injected fault took effect, 0 before (liveness.go)
	endAt        uint64 // the tick the watchdog ended the job, 0 when it did not
	// a permanent fault took hold that only the watchdog can end: a rank stopped, an L3 write hung
	stalled bool
	blocks  blockBook
	models  ModelTally  // what the decision models checked (votes.go, writeback.go)
	clock   *clockModel // a serving-clock job's (clock.go); nil in the others
	served  ClockTally  // what the serving clock's checks compared (clockcheck.go)

	modelChecked bool // the end was compared with the sequential model
	// tests: change what the core served before the model compares it
	tamperOutcome func([]cache.Outcome)
}

// Violation is a broken invariant: what the simulator exists to find.
type Violation struct {
	JobSeed     uint64
	Group, Rank int
	Step        int64
	What        string
	Config      string
}

func (v *Violation) Error() string {
	return fmt.Sprintf(
		"VIOLATION in job seed %d, CP group %d, CP rank %d, step %d: %s\n  job: %s",
		v.JobSeed,
		v.Group,
		v.Rank,
		v.Step,
		v.What,
		v.Config,
	)
}

// pending is one piece of work a rank started and the scheduler has not completed.
type pending struct {
	work     cache.Work
	rank     *rank
	readyAt  uint64
	deadline uint64 // a read given up at it; 0 none
	// it writes its parts of the slab (a backup, a prefetch read); else it reads them
	writes bool
	parts  []partKey
	fail   bool // an injected copy error
	stuck  bool // an injected stuck copy: never completes
	hung   bool // a read that never returns by itself
}

// partKey is one rank's part of one slot of the shared slab.
type partKey struct {
	slab, slot int32
	rank       int32
}

func (j *job) violate(r *rank, what string) {
	if r != nil && j.diverged(r.g) {
		return
	}
	j.violateEvenDiverged(r, what)
}

// violateEvenDiverged records a violation that no injected divergence excuses.
func (j *job) violateEvenDiverged(r *rank, what string) {
	if j.violation != nil {
		return
	}
	v := &Violation{JobSeed: j.cfg.Seed, Group: -1, Rank: -1, What: what, Config: j.cfg.String()}
	if r != nil {
		v.Group, v.Rank, v.Step = r.g.index, r.cp, r.core.Step()
	}
	j.violation = v
}

// diverged says whether g's injected divergence has happened: from then on its ranks place objects
// differently until the next consensus catches it, and what follows from that (slots reused under
// another rank's work, wrong bytes) is the divergence's, which the end of the job checks was
// caught.
func (j *job) diverged(g *group) bool {
	c := &j.cfg
	return c.Fault == FaultDivergence && g.index == 0 &&
		g.ranks[c.FaultRank].core.Step() >= c.FaultStep
}

// delay is how many ticks a piece of work takes: mostly a few, sometimes much longer than the
// others'.
func (j *job) delay() uint64 {
	if j.r.chance(50) {
		return uint64(1 + j.r.intn(j.cfg.LateTicks))
	}
	return uint64(1 + j.r.intn(8))
}

// newJob builds the job's groups and ranks for cfg.
func newJob(cfg JobConfig) (*job, error) {
	j := &job{cfg: cfg, placement: cfg.placement(), r: newRNG(cfg.Seed ^ 0x736368)}
	if cfg.L3.Enabled {
		j.l3 = newSimL3(newRNG(cfg.Seed^0x6673), cfg.L3Faults, &j.cfg)
	}
	for gi := range cfg.DP {
		g := &group{
			j:       j,
			index:   gi,
			mem:     NewMemoryOnNodes(cfg.Geometry, j.placement, cfg.DevicePages, cfg.Seed|1),
			sent:    map[int64][]workload.Event{},
			hashes:  map[int64][]uint64{},
			refs:    map[partKey][]*pending{},
			audited: map[uint64][]int{},
		}
		g.events = makeWorkload(newRNG(cfg.Seed^uint64(gi+1)*0x9e37), &j.cfg)
		arrive(g.events, &j.cfg, gi)
		g.all = g.events
		arrivals, err := j.startClock(gi, g.events)
		if err != nil {
			return nil, err
		}
		if cfg.L3.Enabled {
			j.blocks.learn(g.all, &j.cfg)
		}
		for cp := range cfg.CP {
			r := &rank{
				g:             g,
				cp:            cp,
				node:          j.placement.Node[cp],
				foundKeys:     map[uint64]bool{},
				evictingSlots: map[cache.SlabSlot]bool{},
			}
			if j.l3 != nil {
				r.store = j.l3.store(cp, r.node)
			}
			ccfg := cfg.coreConfig(gi, cp)
			ccfg.Testing.NearEviction = r.nearEviction
			if cp == 0 {
				ccfg.Testing.Served = func(o cache.Outcome) { r.outcomes = append(r.outcomes, o) }
				ccfg.Testing.PrefetchPlanned = r.planned
				ccfg.Testing.PrefetchPlanning = r.planning
				ccfg.Testing.Serving = r.serving
				ccfg.Testing.PrefetchReserving = r.reserving
			}
			c, err := cache.New(ccfg, r)
			if err != nil {
				return nil, err
			}
			r.core = c
			if j.clock != nil {
				r.clock = newRankClock(j.clock, r, g.events, arrivals)
			}
			g.ranks = append(g.ranks, r)
		}
		j.groups = append(j.groups, g)
	}
	if j.l3 != nil {
		j.l3.arm()
	}
	return j, nil
}

// run schedules the job to its end, or to a violation, or to a point where nothing can move.
func (j *job) run() {
	var all []*rank
	for _, g := range j.groups {
		for _, r := range g.ranks {
			r.next, r.stop = iter.Pull(func(yield func(struct{}) bool) {
				r.yield = yield
				r.err = r.core.Run()
				r.state = stFinished
			})
			all = append(all, r)
		}
	}
	defer func() {
		for _, r := range all {
			r.stop()
		}
	}()
	bound := j.cfg.jobTickBound()
	for j.violation == nil {
		j.now++
		if j.now > bound {
			j.noteStuck(all)
			j.violateEvenDiverged(
				nil,
				fmt.Sprintf(
					"the job did not end within %d ticks, and no wait outlived the watchdog: a rank runs without end (%s)",
					bound,
					j.stuck,
				),
			)
			return
		}
		if j.watchdog(all) {
			return
		}
		if !j.move(all) {
			j.noteStuck(all)
			return
		}
	}
}

// move does one thing: resumes a runnable rank or completes a piece of due work, chosen at random;
// when neither is possible now, it moves the clock to the next due work. It reports false when
// nothing can ever move.
func (j *job) move(all []*rank) bool {
	var runnable []*rank
	var due []*pending
	next := uint64(0)
	for _, r := range all {
		if r.runnable() {
			runnable = append(runnable, r)
		}
		for kind, q := range r.queues {
			for _, p := range q[:min(len(q), queueWidth[kind])] {
				if at, ok := p.dueAt(); ok {
					if at <= j.now {
						due = append(due, p)
					} else if next == 0 || at < next {
						next = at
					}
				}
			}
		}
	}
	if n := len(runnable) + len(due); n > 0 {
		if i := j.r.intn(n); i < len(runnable) {
			j.resume(runnable[i])
		} else {
			j.complete(due[i-len(runnable)])
		}
		return true
	}
	if next > 0 {
		j.now = next
		return true
	}
	return false
}

// dueAt is when the work completes: its ready time, or a hung read's deadline; ok is false when it
// never does.
func (p *pending) dueAt() (uint64, bool) {
	switch {
	case p.stuck:
		return 0, false
	case p.hung:
		return p.deadline, p.deadline > 0
	case p.deadline > 0:
		return min(p.readyAt, p.deadline), true
	}
	return p.readyAt, true
}

func (r *rank) runnable() bool {
	switch r.state {
	case stNew:
		return true
	case stBcast:
		return r.g.sentUpTo >= r.bcastStep
	case stColl:
		return r.collDone
	case stWait:
		return len(r.completed) > 0
	}
	return false
}

func (j *job) resume(r *rank) {
	r.state = stRunning
	defer func() {
		if p := recover(); p != nil {
			r.panicked, r.state = p, stFinished
			j.violate(
				r,
				fmt.Sprintf(
					"the rank's step program panicked (the core, or the simulator's Env under it): %v",
					p,
				),
			)
		}
	}()
	r.next()
}

// complete carries out a piece of work's effect on memory and the directory, and queues its
// completion.
func (j *job) complete(p *pending) {
	r := p.rank
	for kind, q := range r.queues {
		if i := slices.Index(q, p); i >= 0 {
			r.queues[kind] = slices.Delete(q, i, i+1)
		}
	}
	r.g.release(p)
	x := cache.Completion{}
	switch w := p.work.(type) {
	case *cache.Copy:
		x = cache.Completion{Kind: cache.CopyDone, Seq: w.Seq}
		if p.fail {
			x.Err = errors.New("injected copy error (sim)")
		} else {
			r.g.mem.Copy(r.cp, w)
			r.g.fromL3(p, nil)
		}
	case *cache.BlockWrite:
		x = cache.Completion{Kind: cache.BlockWritten, Seq: w.Seq, Err: j.writeBlock(r, w)}
	case *cache.BlockRead:
		x = cache.Completion{Kind: cache.BlockReadDone, Seq: w.Prefetch, Block: w.Block, Err: j.readBlock(r, w, p)}
		r.g.prefetchRead(w, x.Err)
		r.g.fromL3(p, x.Err)
	case *cache.ExistenceCheck:
		x = cache.Completion{Kind: cache.BlocksFound, Seq: w.Seq}
		for x.Found < len(w.Keys) && r.store.Exists(w.Keys[x.Found]) {
			r.foundKeys[w.Keys[x.Found]] = true
			x.Found++
		}
		r.checkAnswered(w, x.Found)
	}
	r.completed = append(r.completed, x)
}

// hash folds the job's end into one word: every rank's state and counters.
func (j *job) hash() uint64 {
	h := j.cfg.Seed
	for _, g := range j.groups {
		for _, r := range g.ranks {
			h = pool.Mix64(h ^ r.core.StateHash())
			if r.clock != nil && r.clock.root { // a serving-clock job's first tokens too
				for _, rc := range r.clock.order {
					h = pool.Mix64(h ^ uint64(rc.firstTokenNs))
				}
			}
			c := r.core.Counters()
			for _, agg := range []string{"group", "rank"} {
				for _, v := range c.CounterFields(agg) {
					h = pool.Mix64(h ^ uint64(*v))
				}
			}
		}
	}
	return h
}
