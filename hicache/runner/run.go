package runner

import (
	"errors"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// runState is one rank's run: the core (package cache) and everything around it, which it reaches
// as its Env (env.go): MPI, the shared slab, the copy worker, the L3 I/O, the watchdog.
type runState struct {
	job      *spmd.Job
	opts     *config.Options
	pass     Pass     // what validate asks of this pass; the zero Pass in a run
	testing  *Testing // a test's levers; never nil (the zero Testing in production)
	geometry pool.Geometry
	parts    pool.PartMap // the geometry's part offsets, for the copy and audit loops
	slab     *shm.SharedSlab
	eng      kernels.Engine
	cons     *consensus
	core     *cache.Core
	faults   *faultyEngine // the engine as the runner sees it, with --inject-*-copy
	// divergenceDue: this rank's --inject-divergence step reached its consensus, after which the
	// core perturbs.
	divergenceDue bool
	start         time.Time
	// idealHit: the replica's ideal hits after each request, computed by CP rank 0 beside the
	// replay (the other ranks would wait for it at the start: 0.6 s of the shared trace); nil on
	// the other ranks.
	idealHit chan []int64
	// idealEvents and idealConfig: CP rank 0's workload and ideal, counted after the replay by the
	// steps the serving clock formed, when --flush-every counts them; nil otherwise.
	idealEvents []workload.Event
	idealConfig workload.IdealConfig
	stepBuf     [stepInlineBytes]byte // the step broadcast's buffer
	events      []workload.Event      // CP rank 0's, not yet broadcast
	l3          *l3IO                 // nil without --l3-dir
	metrics     *metricsTicker        // world rank 0's periodic metrics writes; nil when none
	progress    *progress
	clock       *servingClock // nil without the serving clock (config.Options.Serving)

	tasks      chan copyTask
	workerDone chan struct{}
	done       *completions
	doneBuf    []doneWork
	partBytes  int64
	partBuf    []byte // parts' content, for filling and verifying (staging)
	// the CPU build's device buffer, filled and checked in place; nil: staged (the GPU build)
	hostDevice []byte

	// the runner's own tallies (its L3 I/O), summed with the core's in the report
	io            report.Tallies
	prefetchStart map[uint64]time.Time // L3 prefetches started and not yet agreed done
	prefetchWait  report.Quantiles     // start to agreement of each prefetch
	readLatency   report.Quantiles     // issue to landing of each L3 block read that landed

	waiting string // the local wait in progress (waits.go), "" when none

	// testStepComm carries the step broadcast instead of the CP communicator (the Env under
	// simulation, envsim_test.go); nil in a run.
	testStepComm stepBroadcaster
	// the runner's deliberate bugs (runbugs.go): a simbugs build under the harness or a test's
	// Testing only
	testBugs runnerBugs

	tl          *timeline.Recorder // --timeline's; nil without it
	tlNames     timelineNames
	timelineErr error // world rank 0's failure to write --timeline's file

	// boundHits: CP rank 0's OFFLINE bound, computed beside the replay when the options ask for it
	// (offlinebound.go), and offlineBound its statement for the report; nil otherwise.
	boundHits    chan offlineBoundHits
	offlineBound *report.OfflineBound
}

// Run is `cphicache run` on one rank: load the workload, map the shared slab, replay the event
// stream step by step, and report. Every rank calls it; world rank 0 prints. A replay that failed,
// agreed by every rank, still returns its report, with the failure in it (runfailure.go), beside
// the error.
func Run(job *spmd.Job, options *config.Options) (*report.Report, error) {
	return runTesting(job, options, nil)
}

// runTesting is Run with a test's levers (nil: none).
func runTesting(job *spmd.Job, options *config.Options, t *Testing) (*report.Report, error) {
	if err := checkOfflineBound(job, options.OfflineBound); err != nil {
		return nil, err
	}
	opts, err := options.Size(job.Topo.CPSize, job.Topo.NodeSize, job.Topo.GroupNodes)
	if err != nil {
		return nil, err
	}
	rs, err := runPass(job, opts, Pass{}, t)
	if rs == nil {
		return nil, err
	}
	r, err := rs.finalReport(err)
	if err == nil && !r.Failed() { // the same on every rank: the report is aggregated
		err = rs.checkInjectionsFired(r)
	}
	if rs.timelineErr != nil { // world rank 0's alone: it writes the file, and prints the report
		if r != nil {
			r.FailOutput(rs.timelineErr)
		}
		err = errors.Join(err, rs.timelineErr)
	}
	return r, err
}

// runPass replays one workload end to end and leaves its counters and collective statistics in the
// returned state, whose shared slab is already released. A failed replay returns that state too,
// beside the agreed error.
func runPass(job *spmd.Job, opts *config.Options, pass Pass, t *Testing) (*runState, error) {
	if t == nil {
		t = &Testing{}
	}
	rs := &runState{
		job:           job,
		opts:          opts,
		pass:          pass,
		testing:       t,
		start:         time.Now(),
		prefetchStart: map[uint64]time.Time{},
		testBugs:      t.bugs,
	}
	events, err := rs.loadWorkload()
	if err != nil {
		return nil, err
	}
	rs.events = events
	if err := rs.startServingClock(); err != nil {
		return nil, err
	}
	if err := rs.setUp(); err != nil {
		rs.tearDown()
		return nil, err
	}
	defer rs.tearDown()
	if job.Topo.WorldRank == 0 && opts.MetricsPath != "" && opts.MetricsInterval > 0 {
		rs.metrics = newMetricsTicker(opts.MetricsInterval, time.Now)
		defer job.Cleanup.Add(rs.metrics.abandon(opts.MetricsPath))()
	}
	rs.progress = newProgress(job.Topo.WorldRank == 0 && !opts.Quiet, int64(len(events)))
	if job.Topo.WorldRank == 0 && !opts.Quiet {
		sayCopyBytes(events, opts, job.Topo.CPSize)
	}
	// Every rank meets here before the World collectives of the report, so that a CP group that
	// failed (a divergence ends the whole group at the same step) does not leave the other groups
	// waiting in them.
	if err := rs.startTimeline(); err != nil {
		return rs, err
	}
	if rs.clock != nil {
		rs.clock.begin()
	}
	replayErr := rs.core.Run()
	if err := rs.countIdeal(events); replayErr == nil {
		replayErr = err // a broken ideal fails a replay that did not fail otherwise
	}
	rs.progress.done()
	if rs.tl != nil {
		rs.tl.Finish()
	}
	agreed := spmd.AgreeOnFailure(job.Topo.World, replayErr)
	// The timeline of a failed replay is written too: it shows where the failing step's time went.
	rs.timelineErr = rs.writeTimeline()
	return rs, agreed
}

// startServingClock makes the serving clock when the options ask for one
// (config.Options.Serving), with the prefill model that costs its steps, and on CP rank 0 gives
// the events their arrival times (the trace's own, or a Poisson stream's from the seed).
func (rs *runState) startServingClock() error {
	opts := rs.opts
	if opts.Serving == nil {
		return nil
	}
	prefill, err := rs.prefill()
	if err != nil {
		return err
	}
	rs.clock = newServingClock(opts.Serving, rs.job.Topo.CPRank == 0, prefill)
	if rs.clock.root {
		rs.clock.arrive(rs.events, opts.Seed)
	}
	return nil
}

// countIdeal makes, after the replay of events, the ideal's counts the report sets beside the
// run's: on the serving clock's root its replays on a virtual clock (costless, then with the
// modelled L3's hits when the clock is virtual); CP rank 0's ideal hits by request over the steps
// the clock formed, when --flush-every counts them; and, where CP rank 0 computes those, the ideal
// hit tokens of the requests served. It fails when the serving clock's ideal is no floor for a
// request (replayIdeal).
func (rs *runState) countIdeal(events []workload.Event) (err error) {
	if rs.clock != nil && rs.clock.root {
		err = rs.replayServing(events)
	}
	if rs.idealEvents != nil {
		cfg := rs.idealConfig
		cfg.StepEvents = rs.clock.stepEvents
		rs.idealHit <- workload.IdealHitsByRequest(rs.idealEvents, cfg)
	}
	if rs.idealHit != nil {
		rs.io.IdealHitTokens = idealOfServed(<-rs.idealHit, rs.core.Counters().Requests)
	}
	rs.finishOfflineBound()
	return err
}

// idealOfServed is the ideal hits of the first served requests: all of them after a whole replay,
// those the replay reached after a failure part-way, so that the ideal's share of the prompt tokens
// counted is at most 100%.
func idealOfServed(byRequest []int64, served int64) int64 {
	if served <= 0 || len(byRequest) == 0 {
		return 0
	}
	return byRequest[min(served, int64(len(byRequest)))-1]
}

// setUp makes everything the replay needs, in the order that lets each failure be agreed and
// cleaned up: the job's limits checked, the L3 store opened, the shared slab mapped, the copy
// engine and the consensus started under the watchdog, the core made and the copy worker started.
// A failure returns with what was made left for tearDown, which runPass calls, to release.
func (rs *runState) setUp() error {
	t := rs.job.Topo
	g := rs.opts.Geometry(t.CPSize)
	rs.geometry, rs.parts = g, g.PartMap()
	if err := rs.checkJobLimits(g); err != nil {
		return err
	}
	if err := spmd.AgreeOnFailure(t.World, shm.CheckFits(g, t.NodeSize/t.NodeParts)); err != nil {
		return err
	}
	rs.done = newCompletions()
	// The L3 store opens before the slab exists: a directory that cannot hold it fails with nothing
	// to clean up.
	if err := rs.openL3(g); err != nil {
		return err
	}
	if err := rs.openSlab(g); err != nil {
		return err
	}
	// A rank the watchdog ends leaves nothing behind: the segment is unlinked by now (or, on
	// CP-rank 0 before every rank mapped it, unlinked by the cleanup) and the exit releases the
	// mapping. It guards the device set-up too (transport/start.go).
	watchdog := rs.job.NewWatchdog(rs.opts.WatchdogTimeout)
	cfg := coreConfig(rs.opts, rs.pass, rs.testing, g, t.CPRank, t.CPGroup, t.WorldRank)
	cfg.GroupNode, cfg.NodePart = t.GroupNode, t.NodePart
	if err := rs.startEngine(g, cfg, watchdog); err != nil {
		return err
	}
	if rs.l3 != nil {
		rs.l3.attachSlabs(g, rs.slab.Slabs)
	}
	rs.partBytes = g.PartBytes()
	rs.partBuf = make([]byte, rs.partBytes)
	var err error
	if rs.core, err = cache.New(cfg, rs.env()); err != nil {
		return err
	}
	rs.startCopyWorker()
	return nil
}

// openL3 opens the L3 store of --l3-dir, if any, for geometry g, its failure agreed over the
// World.
func (rs *runState) openL3(g pool.Geometry) error {
	if !rs.opts.L3.Enabled() {
		return nil
	}
	t := rs.job.Topo
	var err error
	rs.l3, err = newL3IO(
		rs.opts.L3,
		rs.l3Faults(),
		g,
		rs.opts.Seed,
		l3Place{node: t.GroupNode, part: t.NodePart, partRanks: t.NodePartRanks},
		rs.job.Log,
		rs.done,
	)
	return spmd.AgreeOnFailure(t.World, err)
}

// openSlab maps this node's shared slab of the CP group for geometry g. A group that cannot make
// its slab (a full /dev/shm) fails alike on its ranks; the World agrees on it so that the other
// groups do not start a replay that would wait for the failed one at the end. Each node of the
// group makes its own slab, holding its ranks' parts: its lowest rank of the group creates it and
// sends the name to the group's ranks on the node (CPNode, the whole group on one node).
func (rs *runState) openSlab(g pool.Geometry) error {
	t := rs.job.Topo
	slab, err := shm.OpenSharedSlab(
		t.CPNode,
		g,
		shm.Segment{JobID: rs.opts.JobID, Group: t.CPGroup, Reserve: rs.testing.ReserveShm},
		rs.job.Cleanup,
	)
	rs.slab = slab
	return spmd.AgreeOnFailure(t.World, err)
}

// startEngine starts the copy engine over the slab and the consensus's transport under watchdog
// (transport.Start), then the consensus and the engine as the runner sees it, with the tests'
// levers. A failed start stops the watchdog itself: tearDown stops it only through the consensus,
// which does not exist yet.
func (rs *runState) startEngine(g pool.Geometry, cfg cache.Config, watchdog *spmd.Watchdog) error {
	t := rs.job.Topo
	eng, frontier, err := transport.Start(
		t,
		transport.Config{
			Collective:      rs.opts.Collective,
			Words:           cache.StepVectorWords(cfg.L3),
			DeviceBytes:     cache.DeviceBytes(g, rs.opts.DevicePages),
			Slabs:           rs.slab.Slabs,
			WatchdogTimeout: rs.opts.WatchdogTimeout,
			FailSetup: rs.opts.InjectSetupError.Set &&
				rs.opts.InjectSetupError.Rank == t.WorldRank,
		},
		watchdog,
	)
	if err != nil {
		watchdog.Stop()
		return err
	}
	rs.eng = eng
	proving := frontier != nil && rs.testing.ProveReducer != nil
	if proving {
		frontier = rs.testing.ProveReducer(frontier)
	}
	rs.cons = newConsensus(t.CP, t.CPGroup, frontier, watchdog)
	rs.cons.oneRankTransport = proving
	rs.faults = newFaultyEngine(rs.eng)
	if host, ok := rs.eng.(interface{ Device() []byte }); ok && !rs.testing.StagedDeviceContent {
		rs.hostDevice = host.Device()
	}
	if rs.testing.SlowCopyRank.Set && rs.testing.SlowCopyRank.Rank == t.WorldRank {
		rs.faults.delay.Store(int64(slowCopyDelay))
	}
	return nil
}

// startCopyWorker starts the goroutine that runs this rank's copies off the step's path; tearDown
// closes its queue and waits for it.
func (rs *runState) startCopyWorker() {
	rs.tasks, rs.workerDone = make(chan copyTask, copyQueueTasks), make(chan struct{})
	go func() {
		copyWorker(rs.faults, rs.tasks, rs.done)
		close(rs.workerDone)
	}()
}

func (rs *runState) tearDown() {
	// the copy worker runs the copies queued, so that none touches the slab after it is unmapped
	if rs.tasks != nil {
		close(rs.tasks)
		rs.endWait(
			"copies at the end",
			"the copy worker of this rank stopped",
			func() { <-rs.workerDone },
		)
	}
	if rs.l3 != nil { // its writes read the slab: they end before the slab is unmapped
		rs.endWait(
			"L3 writes at the end",
			"this rank's L3 I/O stopped (a hung filesystem?)",
			rs.l3.close,
		)
	}
	if rs.cons != nil {
		rs.cons.watchdog.Stop()
		transport.Close(rs.cons.transport)
	}
	// The engine goes before the slab: the GPU build unregisters the slab's pages from the GPU
	// before unmapping.
	if rs.eng != nil {
		rs.eng.Close()
	}
	if rs.slab != nil {
		rs.slab.Close()
	}
}

// stepsDone is the last step the replay began (0 before it starts).
func (rs *runState) stepsDone() int64 {
	if rs.core == nil {
		return 0
	}
	return rs.core.Step()
}
