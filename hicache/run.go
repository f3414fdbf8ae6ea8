package hicache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// Injection names a rank and a step for fault injection (--inject-divergence RANK@STEP and friends).
type Injection struct {
	Rank int
	Step int64
	Set  bool
}

// ParseInjection reads RANK@STEP; flag names the flag for errors.
func ParseInjection(flag, s string) (Injection, error) {
	if s == "" {
		return Injection{}, nil
	}
	rank, step, ok := strings.Cut(s, "@")
	r, err1 := strconv.Atoi(rank)
	st, err2 := strconv.ParseInt(step, 10, 64)
	if !ok || err1 != nil || err2 != nil || r < 0 || st < 1 {
		return Injection{}, &spmd.ConfigError{Flag: flag, Reason: fmt.Sprintf("%q is not RANK@STEP (a world rank >= 0 and a step >= 1)", s)}
	}
	return Injection{Rank: r, Step: st, Set: true}, nil
}

func (inj Injection) hits(worldRank int, step int64) bool {
	return inj.Set && inj.Rank == worldRank && inj.Step == step
}

// Options is everything `cphicache run` takes.
type Options struct {
	Layers, PayloadsPerLayer, PageTokens, TokenBytes int
	DevicePages                                      int
	L2Slots                                          int
	SlabBytesMax                                     int64
	Layout                                           pool.Layout
	Policy                                           WritePolicy
	BatchRequests                                    int
	PlacementAssertEvery                             int64
	FlushEvery                                       int64
	Seed                                             uint64
	TracePath                                        string
	VocabSize                                        int
	Synthetic                                        workload.SyntheticConfig
	ReportPath                                       string
	Collective                                       string
	WatchdogTimeout                                  time.Duration
	InjectDivergence                                 Injection
	InjectHang                                       Injection
	InjectExit                                       Injection
	InjectCopyError                                  Injection
	InjectStuckCopy                                  Injection
	InjectSetupError                                 Injection // a world rank whose copy-engine set-up fails
	JobID                                            string
	Quiet                                            bool

	checkInvariants bool // tests: check the controller's invariants after every step

	// validate mode: a divergence is recorded and the group restarts from a fresh state instead of failing; a
	// flush that leaves the cache unlike a fresh one is counted for the flush_reset row (recordFlushWrong); and a
	// workload without a flush gets one at the end, so that the row has something to check (flushAtEnd).
	recordDivergence bool
	recordFlushWrong bool
	flushAtEnd       bool

	// tests only: commit on the local write frontier (see controller.testCommitOnLocalFrontier), with copies on
	// one world rank slowed so that the others' commits come before its copies finish.
	testCommitOnLocalFrontier bool
	testSlowCopyRank          Injection
	testPlacementAssertOff    bool
	// testSyncCopies drains every step: each step commits everything it backed up, so the run's decisions no
	// longer depend on how fast the copy worker ran, and a test can rely on every path being taken.
	testSyncCopies bool
}

// Validate checks the options that need no MPI, so that bad input fails before any shared state exists.
func (o *Options) Validate() error {
	positive := []struct {
		flag  string
		value int
	}{
		{"layers", o.Layers}, {"payloads", o.PayloadsPerLayer}, {"page-tokens", o.PageTokens},
		{"token-bytes", o.TokenBytes}, {"device-pages", o.DevicePages}, {"l2-slots", o.L2Slots},
		{"batch-requests", o.BatchRequests}, {"vocab-size", o.VocabSize},
	}
	for _, p := range positive {
		if p.value < 1 {
			return &spmd.ConfigError{Flag: p.flag, Reason: fmt.Sprintf("%d must be 1 or more", p.value)}
		}
	}
	if o.PayloadsPerLayer > 2 {
		return &spmd.ConfigError{Flag: "payloads", Reason: fmt.Sprintf("%d: use 2 for K and V, or 1 for an MLA latent", o.PayloadsPerLayer)}
	}
	if o.TokenBytes%8 != 0 {
		return &spmd.ConfigError{Flag: "token-bytes", Reason: fmt.Sprintf("%d must be a multiple of 8", o.TokenBytes)}
	}
	if o.PlacementAssertEvery < 0 {
		return &spmd.ConfigError{Flag: "placement-assert-every", Reason: fmt.Sprintf("%d: give 0 (only at the end) or more steps", o.PlacementAssertEvery)}
	}
	if o.FlushEvery < 0 {
		return &spmd.ConfigError{Flag: "flush-every", Reason: fmt.Sprintf("%d: give 0 (off) or more steps", o.FlushEvery)}
	}
	if o.WatchdogTimeout < 0 {
		return &spmd.ConfigError{Flag: "watchdog-timeout", Reason: fmt.Sprintf("%v is negative: give a duration such as 120s, or 0 for no watchdog", o.WatchdogTimeout)}
	}
	if o.Collective != "mpi" && o.Collective != "nccl" {
		return &spmd.ConfigError{Flag: "collective", Reason: fmt.Sprintf("%q is not one of mpi, nccl", o.Collective)}
	}
	return checkCollectiveBuild(o.Collective)
}

func (o *Options) geometry(cp int) pool.Geometry {
	return pool.Geometry{
		CPSize: cp, Layers: o.Layers, PayloadsPerLayer: o.PayloadsPerLayer, PageTokens: o.PageTokens,
		TokenBytes: o.TokenBytes, Slots: o.L2Slots, SlabBytesMax: o.SlabBytesMax, Layout: o.Layout,
	}
}

// runState is one rank's run.
type runState struct {
	job    *spmd.Job
	opts   *Options
	slab   *SharedSlab
	eng    kernels.Engine
	cons   *consensus
	ctrl   *controller
	faults *faultyEngine // the engine as the controller sees it, with --inject-*-copy
	// drainNext: the backups left after this step's commit pin over half of L1, so the next step's consensus
	// drains them first (throttleWrites).
	drainNext bool
	steps     int64
	start     time.Time
}

// Run is `cphicache run` on one rank: load the workload, map the shared slab, replay the event stream step by
// step, and report. Every rank calls it; world rank 0 prints.
func Run(job *spmd.Job, opts *Options) (*Report, error) {
	rs, err := runPass(job, opts)
	if err != nil {
		return nil, err
	}
	return rs.report()
}

// runPass replays one workload end to end and leaves its counters and collective statistics in the returned
// state, whose shared slab is already released.
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
	// Every rank meets here before the World collectives of the report, so that a CP group that failed (a
	// divergence ends the whole group at the same step) does not leave the other groups waiting in them.
	replayErr := rs.replay(events)
	if err := spmd.AgreeOnFailure(job.Topo.World, replayErr); err != nil {
		return nil, err
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
		if rs.opts.TracePath != "" {
			events, loadErr = workload.ReadTraceFile(rs.opts.TracePath, rs.opts.VocabSize)
		} else {
			events, loadErr = workload.GenerateSynthetic(rs.opts.Synthetic)
		}
		if loadErr == nil {
			events = workload.ShardForReplica(events, t.DPSize, t.CPGroup)
		}
	}
	if err := spmd.AgreeOnFailure(t.World, wrapWorkload(loadErr)); err != nil {
		return nil, err
	}
	return events, nil
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
	if err := spmd.AgreeOnFailure(t.World, CheckShmFits(g, t.NodeSize/t.CPSize)); err != nil {
		return err
	}
	// A group that cannot make its slab (a full /dev/shm) fails alike on its ranks; the World agrees on it so
	// that the other groups do not start a replay that would wait for the failed one at the end.
	slab, err := OpenSharedSlab(t.CP, g, rs.opts.JobID, t.CPGroup, rs.job.Cleanup)
	rs.slab = slab
	if err := spmd.AgreeOnFailure(t.World, err); err != nil {
		return err
	}
	cfg := CacheConfig{Geometry: g, DevicePages: rs.opts.DevicePages, Policy: rs.opts.Policy, Seed: rs.opts.Seed}
	// A rank the watchdog ends leaves nothing behind: the segment is unlinked by now (or, on CP-rank 0 before
	// every rank mapped it, unlinked by the cleanup) and the exit releases the mapping. It guards the device
	// set-up too (setup.go).
	watchdog := rs.job.NewWatchdog(rs.opts.WatchdogTimeout)
	frontier, err := rs.startDevices(cfg, watchdog)
	if err != nil {
		watchdog.Stop()
		return err
	}
	rs.cons = newConsensus(t.CP, t.CPGroup, frontier, watchdog, 1<<16)
	rs.faults = newFaultyEngine(rs.eng)
	if rs.ctrl, err = newController(cfg, t.CPRank, rs.faults, slab.Slabs, rs.cons); err != nil {
		return err
	}
	rs.ctrl.recordFlushWrong = rs.opts.recordFlushWrong
	rs.ctrl.testCommitOnLocalFrontier = rs.opts.testCommitOnLocalFrontier
	rs.ctrl.testAssertOff = rs.opts.testPlacementAssertOff
	if rs.opts.testSlowCopyRank.Set && rs.opts.testSlowCopyRank.Rank == t.WorldRank {
		rs.faults.delay.Store(int64(testSlowCopyDelay))
	}
	return nil
}

func (rs *runState) tearDown() {
	if rs.ctrl != nil {
		rs.ctrl.close()
	}
	if rs.cons != nil {
		rs.cons.watchdog.Stop()
		closeFrontier(rs.cons.transport)
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
	return workload.DecodeEvents(payload)
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
	if batch[0].Flush {
		if err := rs.flush(); err != nil {
			return err
		}
	} else {
		rs.serve(batch)
	}
	c.endStep()
	rs.injectHangOrExit(step)
	if rs.opts.checkInvariants {
		if err := c.checkStepInvariants(); err != nil {
			c.fail(FailureInvariant, fmt.Errorf("step %d: %w", step, err))
		}
	}
	if err := rs.agree(StepConsensus, rs.drainNext || rs.opts.testSyncCopies); err != nil {
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

// serve runs a step's requests. A rank that fails stops serving and takes its failure to the step's consensus.
func (rs *runState) serve(batch []workload.Event) {
	c := rs.ctrl
	for i := range batch {
		if err := c.serve(&batch[i].Request); err != nil {
			c.fail(FailureDevice, err)
		}
		if c.failure != nil {
			return
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

// progress shows rank 0's progress: a bar on a terminal, a plain line every 10% in a log file (Slurm).
type progress struct {
	on, tty    bool
	total      int64
	lastDecile int64
	start      time.Time
}

func newProgress(on bool, totalEvents int64) *progress {
	p := &progress{on: on, total: totalEvents, start: time.Now()}
	if fi, err := os.Stderr.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
		p.tty = true
	}
	return p
}

func (p *progress) update(steps, requests int64) {
	if !p.on || p.total == 0 {
		return
	}
	frac := float64(requests) / float64(p.total)
	if p.tty {
		const width = 40
		filled := int(frac * width)
		fmt.Fprintf(os.Stderr, "\r[%s%s] %3.0f%% step %d, %d requests", strings.Repeat("#", filled), strings.Repeat(".", max(0, width-filled)), 100*frac, steps, requests)
		return
	}
	if decile := int64(frac * 10); decile > p.lastDecile {
		p.lastDecile = decile
		fmt.Fprintf(os.Stderr, "cphicache: progress %3d%%: step %d, %d requests of group 0, %.1f s\n", decile*10, steps, requests, time.Since(p.start).Seconds())
	}
}

func (p *progress) done() {
	if p.on && p.tty {
		fmt.Fprintln(os.Stderr)
	}
}
