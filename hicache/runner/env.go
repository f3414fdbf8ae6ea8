package runner

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// The runner as the core's Env (cache.Env): every method of the interface is here, in the
// interface's groups, so that a reader sets them beside the simulated Env of the runner's harness
// (envsim_test.go) and the simulator's (hicache/sim): the step broadcast, the collectives, the copy
// worker and the L3 goroutines, the local waits under the watchdog, the serving clock's steps, and
// the content operations on this rank's device memory and the shared slab. Everything here runs on
// the step goroutine but the workers' I/O; what the methods lean on is in the files of its subject
// (delivery.go, devicecontent.go, copyworker.go, l3io.go, servingstep.go).

// drainPollInterval is how long a rank waits between two looks at its own work while it drains it:
// long enough to let the workers run on an oversubscribed node, short next to a page copy.
const drainPollInterval = 50 * time.Microsecond

// env is the core's Env: the runner itself, or with --timeline the runner with its calls on the
// step goroutine timed (timedEnv), so that without it they cost nothing at all.
func (rs *runState) env() cache.Env {
	if rs.opts.TimelinePath == "" {
		return rs
	}
	return timedEnv{rs}
}

// NextStep is the replicated event stream: CP rank 0 sends each step's events to its group. The
// core reads it one step ahead (cache.Core.Run), so step's events are asked for as step-1 begins:
// the copy faults of step-1 are armed now, before any of its copies.
func (rs *runState) NextStep(step int64) ([]workload.Event, error) {
	rs.injectCopyFaults(step - 1)
	return rs.nextStep(step)
}

// Collective carries one of the core's collectives; a rank told to hang or exit at a step does so
// just before that step's consensus.
func (rs *runState) Collective(c *cache.Collective) error {
	rs.paceConsensus(c)
	if c.Kind == cache.StepConsensus {
		rs.injectHangOrExit(c.Step)
		// The core perturbs the placement after this consensus (cache.Config.PerturbAtStep).
		rs.divergenceDue = rs.divergenceDue ||
			rs.opts.InjectDivergence.Hits(rs.job.Topo.WorldRank, c.Step)
	}
	if own := rs.ownExistenceVotes(c); own != nil {
		err := rs.cons.collective(c) // the deliberate bug: this rank's own votes, not the MIN
		copy(c.Words[cache.VectorWords:], own)
		return err
	}
	return rs.cons.collective(c)
}

// Start begins a copy (on the copy worker), or an L3 block write or read (on the tier's
// goroutines). A full queue blocks the step under the watchdog's drain slot: a worker stuck in a
// copy or a filesystem must not hold it forever.
func (rs *runState) Start(w cache.Work) {
	if _, isCopy := w.(*cache.Copy); !isCopy && rs.l3 == nil {
		panic(rs.broken("L3 work %T without an L3", w))
	}
	switch w := w.(type) {
	case *cache.Copy:
		job := &copyJob{seq: w.Seq, gather: w.Gather, spans: rs.spansFor(w), timing: rs.timeCopy(w)}
		job.layersLeft = len(job.spans)
		if job.layersLeft == 0 || len(w.DevicePages) != len(w.Slots) {
			panic(rs.broken("copy %d of %d pages into %d slots in %d layers: it would never be reported done", w.Seq, len(w.DevicePages), len(w.Slots), job.layersLeft))
		}
		for layer := range job.spans {
			rs.enqueue("copy queue", "the copy worker of this rank stopped taking copies", func() bool {
				select {
				case rs.tasks <- copyTask{job: job, layer: layer}:
					return true
				default:
					return false
				}
			})
		}
	case *cache.BlockWrite:
		t := rs.l3
		bytes := int64(len(w.Pages)) * rs.pageBytesAllRanks()
		rs.enqueue("L3 write queue", "this rank's L3 I/O stopped (a hung filesystem?)", func() bool {
			return offer(t.writeJobs, rs.timedJob(timeline.KindL3Write, bytes, func() {
				buf := t.buffer()
				defer t.release(buf)
				t.done.post(t.write(w, buf))
			}))
		})
	case *cache.ExistenceCheck:
		t := rs.l3
		rs.enqueue("L3 read queue", "this rank's L3 I/O stopped (a hung filesystem?)", func() bool {
			return offer(
				t.readJobs,
				rs.timedJob(timeline.KindExists, int64(len(w.Keys)), func() { t.done.post(t.check(w)) }),
			)
		})
	case *cache.BlockRead:
		t := rs.l3
		now := time.Now()
		p := &pendingRead{
			read:     w,
			issued:   now,
			deadline: readDeadline(rs.opts.L3.PrefetchPolicy, w.Tokens, rs.opts.WatchdogTimeout, now),
		}
		if rs.testBugs.has(bugNoReadDeadline) {
			p.deadline = time.Time{} // the deliberate bug: no read is ever given up
		}
		t.reads[readKey{w.Prefetch, w.Block}] = p
		rs.enqueue("L3 read queue", "this rank's L3 I/O stopped (a hung filesystem?)", func() bool {
			bytes := int64(len(w.Pages)) * rs.pageBytesAllRanks()
			return offer(t.readJobs, rs.timedJob(timeline.KindL3Read, bytes, func() { t.done.post(t.read(p)) }))
		})
	}
}

// Wait polls until done: it waits on this rank's own work (copies, L3 I/O), bounded by the drain
// slot armed under the wait's name, so that work that never completes ends the job with that name,
// however many quick polls the wait is made of (waits.go).
func (rs *runState) Wait(r cache.WaitReason, done func() bool) error {
	rs.deliver(false)
	if done() || rs.waitUnbounded(r, done) {
		return nil
	}
	rs.localWait(r.Name, r.Hint, done)
	return nil
}

// Poll hands the core what has finished. The copy worker's goroutine can sit queued behind this
// one, which is locked to its OS thread for MPI; yielding once a step lets it run, as a GPU's copy
// engine would during the forward pass.
func (rs *runState) Poll() {
	runtime.Gosched()
	rs.deliver(false)
}

// StepDone shows progress and writes the periodic metrics file.
func (rs *runState) StepDone(step int64) {
	if d := rs.testing.SlowStep; d > 0 {
		time.Sleep(d)
	}
	if rs.clock != nil {
		rs.clock.stepEnded()
	}
	rs.progress.update(step, rs.core.Counters().Requests)
	rs.writeMetricsIfDue()
}

// Prefetch times each prefetch from its start to the consensus that agreed it done.
func (rs *runState) Prefetch(seq uint64, resolved bool) {
	if !resolved {
		rs.prefetchStart[seq] = time.Now()
		return
	}
	if start, ok := rs.prefetchStart[seq]; ok {
		rs.prefetchWait.Observe(time.Since(start))
		delete(rs.prefetchStart, seq)
	}
}

// Adopt lets the keeper's store count a block another rank of the group wrote.
func (rs *runState) Adopt(key uint64) { rs.l3.store.Adopt(key) }

// Audit checks a committed object in this node's slab, the node-local parts it names, against the
// content function of the CP rank whose part each is. It reads the slab in its own order, so that
// the CPU streams it: in a layer_first slab an object's consecutive slots hold one part's pages
// side by side, so part by part, page by page within (page by page there, every page's parts were a
// cache and TLB miss each); in a page_first slab a slot holds its parts side by side, so page by
// page.
func (rs *runState) Audit(a *cache.Audit) bool {
	g := rs.geometry
	ok := true
	check := func(page, part, rank, layer, payload int) {
		s := a.Slots[page]
		off := rs.parts.Offset(int(s.Slab), int(s.Slot), part, layer, payload)
		toks := a.Tokens[page*g.PageTokens : (page+1)*g.PageTokens]
		if !cache.PartMatches(
			rs.slab.Slabs[s.Slab][off:off+rs.partBytes],
			toks,
			a.StartPos+page*g.PageTokens,
			g.TokenBytes,
			rs.contentKey(rank, layer, payload),
		) {
			ok = false
		}
	}
	ranks := rs.job.Topo.NodePartRanks[:rs.auditParts(a.Parts)]
	eachPart := func(visit func(part, rank, layer, payload int)) {
		for part, rank := range ranks {
			for layer := range g.Layers {
				for payload := range g.PayloadsPerLayer {
					visit(part, rank, layer, payload)
				}
			}
		}
	}
	if g.Layout == pool.LayerFirst {
		eachPart(func(part, rank, layer, payload int) {
			for page := range a.Slots {
				check(page, part, rank, layer, payload)
			}
		})
		return ok
	}
	for page := range a.Slots {
		eachPart(func(part, rank, layer, payload int) { check(page, part, rank, layer, payload) })
	}
	return ok
}

func isMismatch(err error) bool { return errors.Is(err, cache.ErrBlockMismatch) }

// BeginStep waits until the step may begin (an idle group waits for its next arrival), delivering
// completions meanwhile, and takes the step's start. A group that still holds requests deferred for
// their L3 prefetch does not wait: it serves them at once (serving.StepPlan's first pass), and the
// step's own requests when they arrive.
func (rs *runState) BeginStep(step int64) {
	c := rs.clock
	if c == nil {
		return
	}
	c.thisStep = c.formed[step]
	delete(c.formed, step)
	// A busy group's step begins where the last one ended, as every rank saw that end right after
	// the step's consensus: the read-ahead broadcast and existence checks since are this step's
	// work, and its deadlines are the same on every rank up to the scheduler's skew (a rank's own
	// later start would make its peers wait).
	c.stepStart, c.batchStart = c.lastEnd, c.lastEnd
	if startNs, ok := c.startNs[step]; ok {
		delete(c.startNs, step)
		c.batchStart = max(startNs, c.lastEnd)
		if startNs > c.lastEnd && !c.holdsDeferred(step) {
			if !c.opts.Virtual { // a virtual clock's idle time passes at once
				rs.paceUntil(
					c.wallStart.Add(c.scaled(startNs-c.lastEnd)),
					"serving clock: idle until the step's first arrival",
				)
			}
			c.stepStart, c.wallStart, c.lateNs = startNs, time.Now(), 0
		}
	}
	c.computeEnd, c.idleNs, c.twoPasses = c.stepStart, 0, false // until Served prices the step
}

// Served spends the step's modelled time (serving.PlanStep), in a GPU's order: the L3 reads its
// requests still wait for and their load-backs, each at least its modelled time and at least until
// this rank's real copies finished; then the prefill's forward passes (chunked by --step-tokens,
// serving.Chunk), at their modelled time, while the real copies and L3 I/O go on beside it; each
// request's first token comes at the end of the forward pass that computed its last chunk. The
// prefill's end is waited for just before the step's consensus (paceConsensus): the rank's own
// checks and local waits before it (the load-backs' verification, a throttled drain) run under the
// modelled compute, as they would beside a GPU.
func (rs *runState) Served(s *cache.ServedStep) {
	c := rs.clock
	if c == nil {
		return
	}
	in, hits, deferred, slot := c.stepInput(s)
	clocks := c.record(s, hits)
	plan := rs.planStep(s.Step, in)
	first := plan.PassOf(true) // the step's first pass
	// The prefill starts once the modelled loads are over and this rank's real load-backs too. The
	// serve's own work (its fills stand for the GPU computing KV) overlaps the prefill, as on a
	// GPU, not the loads. A virtual clock waits for nothing real: its step is the model's alone.
	if !s.LoadsDone() && !c.opts.Virtual {
		c.lateNs += rs.paceUntil(
			c.wallStart.Add(c.scaled(first.ComputeStartNs-c.stepStart)),
			"serving clock: modelled L3 reads and load-backs",
		)
		if err := rs.Wait(waitServingLoads, s.LoadsDone); err != nil {
			rs.core.Fail(cache.FailureDevice, err)
		}
		in.LoadsReadyNs = c.stepStart + max(0, time.Since(c.wallStart).Nanoseconds()-c.lateNs)
		plan = rs.planStep(s.Step, in)
	}
	c.computeEnd, c.idleNs, c.twoPasses = plan.EndNs(), plan.IdleNs(), plan.TwoPasses
	if !c.opts.Virtual {
		c.paceConsensusAt = c.wallStart.Add(c.scaled(c.computeEnd - c.stepStart))
	}
	for _, rc := range c.thisStep {
		// the step's own requests, those it defers too, began with its pass
		rc.firstStartNs = plan.Batch.StartNs
	}
	for i, rc := range clocks {
		if rc != nil {
			// its first token comes at the end of the forward pass that computed its last chunk
			p, own := plan.Request(deferred[i], slot[i])
			rc.stepStartNs, rc.computeStartNs = p.StartNs, p.ComputeStartNs
			rc.computeEndNs, rc.chunks = own.FirstTokenNs, own.Chunks
			c.inStep = append(c.inStep, rc)
		}
	}
}

// stepInput is what serving.PlanStep prices for a served step: each request's hits, and whether
// the step before deferred it, with its place in the input's Deferred or Batch (slot), in the
// core's order (the deferred requests first, then the step's own), which is the virtual clock's.
func (c *servingClock) stepInput(
	s *cache.ServedStep,
) (in serving.StepInput, hits []serving.Hit, deferred []bool, slot []int) {
	hits = make([]serving.Hit, len(s.Requests))
	in = serving.StepInput{
		FreeNs:          c.stepStart,
		BatchStartNs:    c.batchStart,
		DeferredSinceNs: c.batchStart,
		ChunkTokens:     c.opts.Batching.StepTokens,
	}
	deferred, slot = make([]bool, len(s.Requests)), make([]int, len(s.Requests))
	for i, r := range s.Requests {
		o := r.Outcome
		hits[i] = serving.Hit{
			PromptTokens: o.L1Hit + o.L2Hit + o.L3Hit + o.Computed,
			L1:           o.L1Hit,
			L2:           o.L2Hit,
			L3:           o.L3Hit,
		}
		var firstStartNs int64
		if rc := c.pending[r.Request]; rc != nil && rc.step < s.Step {
			deferred[i], firstStartNs = true, rc.firstStartNs
		}
		slot[i] = in.Add(hits[i], deferred[i], firstStartNs)
	}
	return in, hits, deferred, slot
}

// Fill writes a node's KV, as the model would have computed it, into its device pages: per layer
// and payload, each run of consecutive device pages is computed in place in the CPU build's device
// buffer, or into a staging buffer written in one call (a part is often a few hundred bytes, and a
// GPU's copy per part would cost more than the part).
func (rs *runState) Fill(f *cache.Fill) error {
	g := rs.geometry
	for r := range rs.deviceRunsOf(f.DevicePages) {
		for i := r.from; i < r.to; i++ {
			cache.FillPart(
				r.part(i, rs.partBytes),
				f.Tokens[i*g.PageTokens:(i+1)*g.PageTokens],
				f.StartPos+i*g.PageTokens,
				g.TokenBytes,
				r.key,
			)
		}
		if rs.hostDevice != nil {
			continue
		}
		if err := rs.faults.WriteDevice(r.offset, r.buf); err != nil {
			return fmt.Errorf(
				"write KV of pages %d..%d: %w",
				f.DevicePages[r.from],
				f.DevicePages[r.to-1],
				err,
			)
		}
	}
	return nil
}

// VerifyLoad checks every part of a finished load-back against the content function, in place in
// the CPU build's device buffer, or reading each run of consecutive device pages of a layer and
// payload back in one call.
func (rs *runState) VerifyLoad(v *cache.Verify) (checked, mismatches int64, err error) {
	g := rs.geometry
	bad := make([]bool, rs.pagesToVerify(len(v.DevicePages)))
	for r := range rs.deviceRunsOf(v.DevicePages) {
		if rs.hostDevice == nil {
			if err := rs.faults.ReadDevice(r.offset, r.buf); err != nil {
				return 0, 0, err
			}
		}
		for i := r.from; i < min(r.to, len(bad)); i++ {
			if !cache.PartMatches(
				r.part(i, rs.partBytes),
				v.Tokens[i*g.PageTokens:(i+1)*g.PageTokens],
				v.StartPos+i*g.PageTokens,
				g.TokenBytes,
				r.key,
			) {
				bad[i] = true
			}
		}
	}
	for _, b := range bad {
		checked++
		if b {
			mismatches++
		}
	}
	return checked, mismatches, nil
}
