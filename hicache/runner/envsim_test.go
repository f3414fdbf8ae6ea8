package runner

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// The runner's Env under simulation (SIMULATOR.md, "The runner under simulation"): whole jobs of
// the real runState, every rank of every CP group in this one process, each rank's core.Run on a
// goroutine of its own, over a simulated MPI (envsim_comm_test.go), a simulated, fault-injecting
// filesystem (envsim_fs_test.go) and real memory. What runs is the runner's own code: its Env
// (env.go: Start, Wait and enqueue under the watchdog, deliver, the read deadlines), its copy
// worker, its L3 goroutines and store, its audit, fill and load-back checks, its consensus under
// the watchdog, its step broadcast's encoding, and the watchdog itself, whose exit ends the
// simulated job as mpirun ends a real one. What does not run: setUp (topology, the shared-memory
// slab, transport.Start), which needs MPI and /dev/shm; and the process-level injections
// (--inject-hang, --inject-exit, --inject-stuck-copy), which sleep or exit the process. The SPMD
// tests under mpirun cover those (SIMULATOR.md lists which). Each job runs in a testing/synctest
// bubble (envsim_bubble_test.go), so that the runner's time (the watchdog, the read deadlines, the
// polls) is the job's simulated clock; what blocks outside Go's channels, conds and timers (a cgo
// copy of the CUDA engine, an MPI call, a syscall on a real file or on /dev/shm) cannot run in a
// bubble, whose clock would stop while it blocked: the host engine, the simulated MPI and
// filesystem and plain memory stand in for them.

// envFault is the one fault a simulated job injects.
type envFault int

const (
	envFaultNone envFault = iota
	// the n-th copy (a layer of a backup or load-back) of a rank never completes
	envFaultStuckCopy
	envFaultStuckLoad // the n-th load-back copy of a rank never completes
	// --inject-copy-error, the runner's own injection, at a rank and step
	envFaultCopyError
	// the n-th block file the job opens hangs (a hung filesystem), on whichever rank opens it
	envFaultHungRead
	// opens failing (EIO), writes failing (ENOSPC), blocks published corrupt
	envFaultL3Errors
)

var envFaultNames = [...]string{
	"none",
	"stuck_copy",
	"stuck_load",
	"copy_error",
	"hung_read",
	"l3_errors",
}

func (f envFault) String() string { return envFaultNames[f] }

// envSimJob is one simulated job, drawn from its seed: the same seed draws the same configuration,
// workload and fault (the interleaving of its goroutines is the machine's: see SIMULATOR.md on
// reproducibility).
type envSimJob struct {
	seed uint64
	opts *config.Options
	// the core's step invariants checked; each rank's L3 filesystem its own view of the shared one
	testing Testing
	cp, dp  int
	// each CP group over its nodes (one, or two in blocks or round robin)
	place     cache.NodePlacement
	fault     envFault
	faultRank int // world rank
	faultAt   int // which copy, or which open, of that rank (from 1)
	// the same job, with no fault, runs first on the same L3: its blocks are there to read, as
	// after a restart
	warm bool
	// some ranks' views of the L3 directory lack blocks others see (envsim_views_test.go)
	view splitView
	bugs runnerBugs
}

// envHangTimeout is the watchdog's timeout in a job whose fault hangs: short, since every drain
// poll (50 us) up to it is a move of the simulated clock; envCalmTimeout is the others', which only
// a wait nothing else ends can reach: the simulated clock stands still while any of the job's
// goroutines can run, however loaded the machine.
const (
	envHangTimeout = time.Second
	envCalmTimeout = 60 * time.Second
)

func (j *envSimJob) String() string {
	l3 := "no l3"
	if j.opts.L3.Enabled() {
		l3 = fmt.Sprintf("l3 %v and %v (warm %v)", j.opts.L3.WritePolicy, j.opts.L3.PrefetchPolicy, j.warm)
	}
	return fmt.Sprintf(
		"job seed %d: cp %d dp %d over %d node(s), %v, %v, %s, fault %v on world rank %d at %d%s",
		j.seed,
		j.cp,
		j.dp,
		max(1, j.opts.GroupNodes),
		j.opts.Layout,
		j.opts.Policy,
		l3,
		j.fault,
		j.faultRank,
		j.faultAt,
		j.view,
	)
}

// drawEnvSimJob draws a job within small bounds: CP 1 to 4, DP 1 or 2, both layouts, every write
// policy, an L3 in half the jobs (every L3 write and prefetch policy), one fault.
func drawEnvSimJob(seed uint64) *envSimJob {
	rng := rand.New(rand.NewPCG(seed, 0xe57))
	j := &envSimJob{seed: seed, cp: 1 + rng.IntN(4), dp: 1 + rng.IntN(2)}
	syn := workload.DefaultSyntheticConfig()
	syn.Seed = rng.Uint64()
	syn.Conversations, syn.TurnsMax, syn.SystemPrompts = (3+rng.IntN(8))*j.dp, 2+rng.IntN(
		4,
	), 1+rng.IntN(
		3,
	)
	syn.SystemPromptTokens, syn.TurnTokens, syn.OutputTokens = 32+rng.IntN(
		96,
	), 16+rng.IntN(
		32,
	), 8+rng.IntN(
		24,
	)
	if rng.IntN(2) == 0 {
		syn.FlushEvery = (8 + rng.IntN(24)) * j.dp
	}
	pageTokens := []int{4, 8, 16}[rng.IntN(3)]
	longest := syn.SystemPromptTokens + syn.TurnsMax*(3*syn.TurnTokens+3*syn.OutputTokens)/2
	devicePages := longest/pageTokens + 1 + rng.IntN(longest/pageTokens+8)
	j.opts = &config.Options{
		Layers:           1 + rng.IntN(2),
		PayloadsPerLayer: 1 + rng.IntN(2),
		PageTokens:       pageTokens,
		TokenBytes:       8 << rng.IntN(2),
		DevicePages:      devicePages,
		L2Slots:          devicePages/2 + rng.IntN(2*devicePages),
		SlabBytesMax:     1 << (15 + rng.IntN(6)),
		Layout:           []pool.Layout{pool.LayerFirst, pool.PageFirst}[rng.IntN(2)],
		Policy: []cache.WritePolicy{
			cache.WriteThrough, cache.WriteThroughSelective, cache.WriteBack,
		}[rng.IntN(3)],
		BatchRequests: 1 + rng.IntN(
			4,
		),
		PlacementAssertEvery: 1 + rng.Int64N(8),
		Seed:                 1 + rng.Uint64()%1000,
		VocabSize:            32000,
		Synthetic:            syn,
		Collective:           "mpi",
		WatchdogTimeout:      envCalmTimeout,
		JobID:                testJobID,
		Quiet:                true,
		SyncCopies:           rng.IntN(4) == 0,
	}
	j.testing = Testing{Core: cache.Testing{CheckInvariants: true}}
	if rng.IntN(2) == 0 {
		j.opts.L3 = config.L3Options{
			Dir:               "/l3",
			Bytes:             1 << (12 + rng.IntN(18)),
			BlockTokens:       pageTokens * (1 + rng.IntN(4)),
			WritePolicy:       []cache.L3WritePolicy{cache.L3WriteThrough, cache.L3WriteBack}[rng.IntN(2)],
			PrefetchThreshold: pageTokens * rng.IntN(4),
			PrefetchPolicy: []cache.PrefetchPolicy{
				cache.PrefetchWaitComplete, cache.PrefetchTimeout, cache.PrefetchBestEffort,
			}[rng.IntN(3)],
		}
		j.warm = rng.IntN(2) == 0
	}
	j.fault, j.faultRank, j.faultAt = envFault(rng.IntN(8)), rng.IntN(j.cp*j.dp), 1+rng.IntN(6)
	if j.fault > envFaultL3Errors && j.opts.L3.Enabled() {
		// Three times as often as the others with an L3: it fires only where the job reads, and
		// only a read that hangs under timeout or best_effort, which a drain waits for, shows a
		// read deadline that is missing.
		j.fault = envFaultHungRead
	}
	switch {
	case j.fault > envFaultL3Errors, j.fault >= envFaultHungRead && !j.opts.L3.Enabled():
		j.fault = envFaultNone
	case j.fault == envFaultHungRead:
		// The n-th block open of the job, on whichever rank reads: a small job reads few, and a
		// cold one seldom.
		j.faultAt, j.warm = 1+rng.IntN(4), j.warm || rng.IntN(4) != 0
	case j.fault == envFaultCopyError:
		j.opts.InjectCopyError = config.Injection{
			Rank: j.faultRank,
			Step: int64(j.faultAt * (1 + rng.IntN(4))),
			Set:  true,
		}
	}
	nodes := 1
	if j.cp%2 == 0 && rng.IntN(3) == 0 {
		nodes = 2
	}
	j.place = cache.PlaceOnNodes(j.cp, nodes, rng.IntN(2) == 0)
	sized, err := j.opts.Size(j.cp, j.cp*j.dp/nodes, nodes)
	if err != nil {
		panic(fmt.Sprintf("job seed %d: the harness drew options it cannot size: %v", seed, err))
	}
	j.opts = sized
	if j.hangs() {
		j.opts.WatchdogTimeout = envHangTimeout
	}
	j.view = drawSplitView(j)
	return j
}

// hangs says whether the job's fault can leave a wait that never ends, for the watchdog to end.
func (j *envSimJob) hangs() bool {
	return j.fault == envFaultStuckCopy || j.fault == envFaultStuckLoad ||
		j.fault == envFaultHungRead
}

// hangEngine is a rank's copy engine under the runner's faultyEngine: the real host engine, but the
// chosen copy never completes until the job ends (as a copy engine that hangs; the process's end
// would end it).
type hangEngine struct {
	*kernels.HostEngine
	stickAt     int64 // the stickAt-th copy hangs (0: none)
	loadsOnly   bool  // count load-backs (Scatter) only
	copies      atomic.Int64
	hungAtNs    atomic.Int64
	release     chan struct{}
	releaseOnce sync.Once
}

func (e *hangEngine) Gather(spans []kernels.Span) error {
	if !e.loadsOnly {
		e.maybeHang()
	}
	return e.HostEngine.Gather(spans)
}

func (e *hangEngine) Scatter(spans []kernels.Span) error {
	e.maybeHang()
	return e.HostEngine.Scatter(spans)
}

func (e *hangEngine) maybeHang() {
	if e.stickAt > 0 && e.copies.Add(1) == e.stickAt {
		e.hungAtNs.Store(time.Now().UnixNano())
		<-e.release
	}
}

func (e *hangEngine) releaseHang() { e.releaseOnce.Do(func() { close(e.release) }) }

// envRank is one simulated rank: the runner's state, its Env as the core sees it (the runner's,
// seen by the harness's models), its engine, and how its replay ended.
type envRank struct {
	rs     *runState
	env    *simEnv
	engine *hangEngine
	err    error
}

// newEnvRank builds one rank's runState as setUp does (run.go), with the simulated MPI, filesystem
// and slab in place of the real ones (slabs: its node's), and starts its copy worker.
func (e *envSim) newEnvRank(group, cpRank int, slabs [][]byte, comm *simComm) (*envRank, error) {
	j := e.job
	g := j.opts.Geometry(j.cp)
	world := group*j.cp + cpRank
	node, part, nodes := j.place.Node[cpRank], j.place.Part[cpRank], max(1, g.Nodes)
	partRanks := j.place.RanksOn(node)
	topo := &spmd.Topology{
		CPSize:        j.cp,
		DPSize:        j.dp,
		WorldRank:     world,
		CPRank:        cpRank,
		CPGroup:       group,
		NodeSize:      j.cp * j.dp / nodes,
		GroupNodes:    nodes,
		GroupNode:     node,
		NodePart:      part,
		NodeParts:     j.cp / nodes,
		NodePartRanks: partRanks,
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tst := j.testing
	tst.L3.FS = rankFS{f: e.fs, rank: world}
	rs := &runState{
		job:           &spmd.Job{Topo: topo, Log: log, Cleanup: &spmd.Cleanup{}},
		opts:          j.opts,
		testing:       &tst,
		start:         time.Now(),
		prefetchStart: map[uint64]time.Time{},
		geometry:      g,
		parts:         g.PartMap(),
		done:          newCompletions(),
		testStepComm:  comm,
		testBugs:      j.bugs,
	}
	if cpRank == 0 {
		events, err := workload.GenerateSynthetic(j.opts.Synthetic)
		if err != nil {
			return nil, err
		}
		rs.events = workload.ShardForReplica(events, j.dp, group)
	}
	if j.opts.L3.Enabled() {
		var err error
		if rs.l3,
			err = newL3IO(
			j.opts.L3,
			rs.l3Faults(),
			g,
			j.opts.Seed,
			l3Place{node: node, part: part, partRanks: partRanks},
			log,
			rs.done,
		); err != nil {
			return nil, err
		}
		rs.l3.attachSlabs(g, slabs)
	}
	host, err := kernels.NewHostEngine(cache.DeviceBytes(g, j.opts.DevicePages), slabs, 1)
	if err != nil {
		return nil, err
	}
	engine := &hangEngine{HostEngine: host, release: make(chan struct{})}
	if world == j.faultRank && (j.fault == envFaultStuckCopy || j.fault == envFaultStuckLoad) {
		engine.stickAt, engine.loadsOnly = int64(j.faultAt), j.fault == envFaultStuckLoad
	}
	rs.slab, rs.eng, rs.hostDevice = &shm.SharedSlab{Slabs: slabs}, host, host.Device()
	rs.cons = newConsensus(comm, group, nil, e.watchdogFor(world))
	rs.faults = newFaultyEngine(engine)
	rs.partBytes = g.PartBytes()
	rs.partBuf = make([]byte, rs.partBytes)
	env := e.newSimEnv(rs, world, node, e.models[group])
	if j.opts.L3.Enabled() && j.opts.L3.WritePolicy == cache.L3WriteBack {
		tst.Core.NearEviction = env.nearEviction
	}
	cfg := coreConfig(j.opts, rs.pass, rs.testing, g, cpRank, group, world)
	cfg.GroupNode, cfg.NodePart = node, part
	if rs.core, err = cache.New(cfg, env); err != nil {
		return nil, err
	}
	rs.progress = newProgress(false, 0)
	rs.tasks, rs.workerDone = make(chan copyTask, copyQueueTasks), make(chan struct{})
	go func() {
		copyWorker(rs.faults, rs.tasks, rs.done)
		close(rs.workerDone)
	}()
	return &envRank{rs: rs, env: env, engine: engine}, nil
}
