package hicache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/kernels"
)

// runState is one rank's run.
type runState struct {
	job    *spmd.Job
	opts   *Options
	slab   *shm.SharedSlab
	eng    kernels.Engine
	cons   *consensus
	ctrl   *controller
	faults *faultyEngine // the engine as the controller sees it, with --inject-*-copy
	// drainNext: the backups left after this step's commit pin over half of L1, so the next step's consensus
	// drains them first (throttleWrites).
	drainNext bool
	steps     int64
	start     time.Time
	// idealHitTokens: the replica's ideal hits, computed by CP rank 0 as it loads the workload.
	idealHitTokens int64
	// deferred: requests of the last step waiting for their L3 prefetch; served first in the next step.
	deferred []deferredRequest
	l3       *l3Tier        // nil without --l3-dir
	metrics  *metricsTicker // world rank 0's periodic metrics writes; nil when none
}

// Run is `cphicache run` on one rank: load the workload, map the shared slab, replay the event stream step by
// step, and report. Every rank calls it; world rank 0 prints. A replay that failed, agreed by every rank, still
// returns its report, with the failure in it (runfailure.go), beside the error.
func Run(job *spmd.Job, options *Options) (*Report, error) {
	opts, err := options.Size(job.Topo.CPSize, job.Topo.NodeSize)
	if err != nil {
		return nil, err
	}
	rs, err := runPass(job, opts)
	if rs == nil {
		return nil, err
	}
	return rs.finalReport(err)
}

// runPass replays one workload end to end and leaves its counters and collective statistics in the returned
// state, whose shared slab is already released. A failed replay returns that state too, beside the agreed error.
func runPass(job *spmd.Job, opts *Options) (*runState, error) {
	rs := &runState{job: job, opts: opts, start: time.Now()}
	events, err := rs.loadWorkload()
	if err != nil {
		return nil, err
	}
	if err := rs.setUp(); err != nil {
		rs.tearDown()
		return nil, err
	}
	defer rs.tearDown()
	rs.ctrl.counters.IdealHitTokens = rs.idealHitTokens
	if job.Topo.WorldRank == 0 && opts.MetricsPath != "" && opts.MetricsInterval > 0 {
		rs.metrics = newMetricsTicker(opts.MetricsInterval, time.Now)
		defer job.Cleanup.Add(rs.metrics.abandon(opts.MetricsPath))()
	}
	// Every rank meets here before the World collectives of the report, so that a CP group that failed (a
	// divergence ends the whole group at the same step) does not leave the other groups waiting in them.
	replayErr := rs.replay(events)
	if err := spmd.AgreeOnFailure(job.Topo.World, replayErr); err != nil {
		return rs, err
	}
	return rs, nil
}

// loadWorkload has CP-rank 0 of each group read (or generate) its replica's share; the others get events by
// broadcast during the replay. A bad trace fails on every rank, before anything is created.
func (rs *runState) loadWorkload() ([]workload.Event, error) {
	t := rs.job.Topo
	var events []workload.Event
	var loadErr error
	if t.CPRank == 0 {
		events, loadErr = rs.readWorkload()
		if loadErr == nil {
			events = workload.ShardForReplica(events, t.DPSize, t.CPGroup)
			rs.idealHitTokens = workload.IdealHitTokens(events, workload.IdealConfig{PageTokens: rs.opts.PageTokens,
				VocabSize: rs.opts.VocabSize, BatchRequests: rs.opts.BatchRequests, FlushEverySteps: rs.opts.FlushEvery})
		}
	}
	if err := spmd.AgreeOnFailure(t.World, wrapWorkload(loadErr)); err != nil {
		return nil, err
	}
	return events, nil
}

// readWorkload reads the trace, or generates the synthetic workload. A Mooncake trace's requests stay compact
// (block ids) here and in the step broadcast; nextStep expands them on every rank.
func (rs *runState) readWorkload() ([]workload.Event, error) {
	o := rs.opts
	if o.TracePath == "" {
		return workload.GenerateSynthetic(o.Synthetic)
	}
	return workload.ReadTraceFileAs(o.TracePath, workload.TraceOptions{Format: o.TraceFormat, VocabSize: o.VocabSize,
		BlockTokens: o.TraceBlockTokens, LimitRequests: o.TraceLimit})
}

// WorkloadError is a bad workload (trace file); every reading rank finds the same one.
type WorkloadError struct{ Err error }

func (e *WorkloadError) Error() string { return e.Err.Error() }
func (e *WorkloadError) Unwrap() error { return e.Err }

// Scope: every rank that reads the workload finds the same error, and every rank learns it.
func (e *WorkloadError) Scope() spmd.Scope { return spmd.JobScope }

func wrapWorkload(err error) error {
	if err == nil {
		return nil
	}
	return &WorkloadError{err}
}

func (rs *runState) setUp() error {
	t := rs.job.Topo
	g := rs.opts.geometry(t.CPSize)
	if err := rs.checkJobLimits(g); err != nil {
		return err
	}
	if err := spmd.AgreeOnFailure(t.World, shm.CheckFits(g, t.NodeSize/t.CPSize)); err != nil {
		return err
	}
	// The L3 store opens before the slab exists: a directory that cannot hold it fails with nothing to clean up.
	if rs.opts.L3.Enabled() {
		var err error
		rs.l3, err = newL3Tier(rs.opts.L3, g, rs.opts.Seed, t.CPRank, rs.job.Log)
		if err := spmd.AgreeOnFailure(t.World, err); err != nil {
			return err
		}
	}
	// A group that cannot make its slab (a full /dev/shm) fails alike on its ranks; the World agrees on it so
	// that the other groups do not start a replay that would wait for the failed one at the end.
	slab, err := shm.OpenSharedSlab(t.CP, g, shm.Segment{JobID: rs.opts.JobID, Group: t.CPGroup, Reserve: rs.opts.testReserveShm}, rs.job.Cleanup)
	rs.slab = slab
	if err := spmd.AgreeOnFailure(t.World, err); err != nil {
		return err
	}
	cfg := CacheConfig{Geometry: g, DevicePages: rs.opts.DevicePages, Policy: rs.opts.Policy, Seed: rs.opts.Seed}
	// A rank the watchdog ends leaves nothing behind: the segment is unlinked by now (or, on CP-rank 0 before
	// every rank mapped it, unlinked by the cleanup) and the exit releases the mapping. It guards the device
	// set-up too (transport/start.go).
	watchdog := rs.job.NewWatchdog(rs.opts.WatchdogTimeout)
	eng, frontier, err := transport.Start(t, transport.Config{Collective: rs.opts.Collective, Words: consensusWords,
		DeviceBytes: cfg.DeviceBytes(), Slabs: slab.Slabs, WatchdogTimeout: rs.opts.WatchdogTimeout,
		FailSetup: rs.opts.InjectSetupError.Set && rs.opts.InjectSetupError.Rank == t.WorldRank}, watchdog)
	if err != nil {
		watchdog.Stop()
		return err
	}
	rs.eng = eng
	rs.cons = newConsensus(t.CP, t.CPGroup, frontier, watchdog, 1<<16)
	rs.faults = newFaultyEngine(rs.eng)
	if rs.ctrl, err = newController(cfg, t.CPRank, rs.faults, slab.Slabs, rs.cons); err != nil {
		return err
	}
	if rs.l3 != nil {
		rs.l3.attachSlabs(g, slab.Slabs)
		rs.ctrl.l3 = rs.l3
	}
	rs.ctrl.recordFlushWrong = rs.opts.recordFlushWrong
	rs.ctrl.testCommitOnLocalFrontier = rs.opts.testCommitOnLocalFrontier
	rs.ctrl.testAssertOff = rs.opts.testPlacementAssertOff
	rs.ctrl.testEvictionModel = rs.opts.testEvictionModel
	if rs.opts.testSlowCopyRank.Set && rs.opts.testSlowCopyRank.Rank == t.WorldRank {
		rs.faults.delay.Store(int64(testSlowCopyDelay))
	}
	return nil
}

func (rs *runState) tearDown() {
	if rs.ctrl != nil {
		rs.ctrl.close()
	}
	if rs.l3 != nil { // its I/O reads and writes the slab: it ends before the slab is unmapped
		rs.l3.close()
	}
	if rs.cons != nil {
		rs.cons.watchdog.Stop()
		transport.Close(rs.cons.transport)
	}
	// The engine goes before the slab: the GPU build unregisters the slab's pages from the GPU before unmapping.
	if rs.eng != nil {
		rs.eng.Close()
	}
	if rs.slab != nil {
		rs.slab.Close()
	}
}

// nextStep is the replicated event stream: CP-rank 0 sends each step's events to its group. A step is up to
// --batch-requests requests, or one flush. An empty step ends the stream.
func (rs *runState) nextStep(events *[]workload.Event) ([]workload.Event, error) {
	cp := rs.job.Topo.CP
	var payload []byte
	if cp.Rank() == 0 {
		batch := workload.TakeBatch(events, rs.opts.BatchRequests)
		payload = workload.EncodeEvents(batch)
		if len(batch) == 0 {
			payload = nil
		}
	}
	var header [8]byte
	binary.LittleEndian.PutUint64(header[:], uint64(len(payload)))
	// The broadcast of the event stream blocks like a collective, so the watchdog guards it too: a hung CP-rank
	// 0 must not leave its group waiting forever.
	rs.cons.watchdog.Arm("step broadcast", rs.cons.group, cp.Size(), rs.steps+1)
	defer rs.cons.watchdog.Disarm()
	if err := cp.BcastBytes(header[:], 0); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint64(header[:])
	if n == 0 {
		return nil, nil
	}
	if cp.Rank() != 0 {
		payload = make([]byte, n)
	}
	if err := cp.BcastBytes(payload, 0); err != nil {
		return nil, err
	}
	batch, err := workload.DecodeEvents(payload)
	workload.ExpandEvents(batch, rs.opts.VocabSize)
	return batch, err
}

// replay runs the step loop. Every rank of the group runs the same steps and enters the same collectives in the
// same order: nothing below returns early on local state before a collective, and a rank's own failure waits for
// the next consensus, where the whole group learns it.
func (rs *runState) replay(events []workload.Event) error {
	progress := newProgress(rs.job.Topo.WorldRank == 0 && !rs.opts.Quiet, int64(len(events)))
	for {
		batch, err := rs.nextStep(&events)
		if err != nil {
			return err
		}
		if batch == nil {
			break
		}
		rs.steps++
		if err := rs.runStep(rs.steps, batch); err != nil {
			return err
		}
		progress.update(rs.steps, rs.ctrl.counters.Requests)
		rs.writeMetricsIfDue()
	}
	// Requests still waiting for a prefetch get steps of their own (every rank knows: the list is replicated).
	for len(rs.deferred) > 0 {
		rs.steps++
		if err := rs.runStep(rs.steps, nil); err != nil {
			return err
		}
	}
	progress.done()
	return rs.finish()
}

// finish ends the replay: every backup issued is committed, the last consensus compares the final digests (and
// carries any failure still waiting), and the objects are compared one by one. Validate first flushes once when
// the workload had none, so that its flush row has a flush to check.
func (rs *runState) finish() error {
	if rs.opts.flushAtEnd && rs.ctrl.counters.Flushes == 0 {
		if err := rs.flush(); err != nil {
			return err
		}
	}
	if err := rs.agree(FinalConsensus, true); err != nil {
		return err
	}
	return rs.comparePlacements()
}

func (rs *runState) runStep(step int64, batch []workload.Event) error {
	c := rs.ctrl
	rs.cons.step = step
	rs.injectCopyFaults(step)
	rs.serveDeferred()
	if len(batch) > 0 && batch[0].Flush {
		if err := rs.flush(); err != nil {
			return err
		}
	} else if err := rs.serve(batch); err != nil {
		return err
	}
	c.endStep()
	rs.injectHangOrExit(step)
	if rs.opts.checkInvariants {
		if err := c.checkStepInvariants(); err != nil {
			c.fail(FailureInvariant, fmt.Errorf("step %d: %w", step, err))
		}
	}
	if err := rs.agree(StepConsensus, rs.drainNext || rs.opts.SyncCopies); err != nil {
		return err
	}
	rs.drainNext = c.throttleWrites()
	if rs.opts.InjectDivergence.hits(rs.job.Topo.WorldRank, step) {
		c.alloc.Perturb()
	}
	if rs.opts.FlushEvery > 0 && step%rs.opts.FlushEvery == 0 {
		if err := rs.flush(); err != nil {
			return err
		}
	}
	if rs.opts.PlacementAssertEvery > 0 && step%rs.opts.PlacementAssertEvery == 0 {
		return rs.comparePlacements()
	}
	return nil
}

// serve runs a step's requests. With an L3 it first agrees the step's prefetches (a collective every rank
// enters, whatever its state), and the requests that wait for one are served in the next step. A rank that fails
// stops serving and takes its failure to the step's consensus.
func (rs *runState) serve(batch []workload.Event) error {
	c := rs.ctrl
	var waiting map[*workload.Request]bool // nil without an L3: no allocation on the step's path
	if c.l3 != nil && len(batch) > 0 {
		deferred, err := c.planPrefetch(batch, rs.opts.BatchRequests)
		if err != nil {
			return err
		}
		rs.deferred = deferred
		waiting = make(map[*workload.Request]bool, len(deferred))
		for _, d := range deferred {
			waiting[d.req] = true
		}
	}
	for i := range batch {
		if c.failure != nil {
			return nil
		}
		if waiting[&batch[i].Request] {
			continue
		}
		if err := c.serve(&batch[i].Request); err != nil {
			c.fail(FailureDevice, err)
		}
	}
	return nil
}

// serveDeferred serves the requests the last step kept waiting for their prefetch, each after its prefetched
// blocks joined the tree.
func (rs *runState) serveDeferred() {
	c := rs.ctrl
	deferred := rs.deferred
	rs.deferred = nil
	for _, d := range deferred {
		if c.failure != nil {
			return
		}
		c.attachPrefetch(d.req, d.prefetch)
		if err := c.serve(d.req); err != nil {
			c.fail(FailureDevice, err)
		}
	}
}

// agree runs one consensus of the controller. In validate a divergence it reports is recorded, and the group
// starts again from a fresh state.
func (rs *runState) agree(kind ConsensusKind, drain bool) error {
	_, err := rs.ctrl.agree(kind, drain, true)
	return rs.recordOr(err)
}

func (rs *runState) flush() error {
	return rs.recordOr(rs.ctrl.flush(rs.opts.recordDivergence))
}

func (rs *runState) comparePlacements() error {
	return rs.recordOr(rs.ctrl.comparePlacements(rs.opts.recordDivergence))
}

// recordOr returns err, except a divergence in validate, which it records before the group recovers.
func (rs *runState) recordOr(err error) error {
	var div *DivergenceError
	if !errors.As(err, &div) || !rs.opts.recordDivergence {
		return err
	}
	if rs.ctrl.counters.DivergenceFirstStep == 0 {
		rs.ctrl.counters.DivergenceFirstStep = div.Step
	}
	return rs.ctrl.recover()
}
