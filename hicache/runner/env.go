package runner

import (
	"errors"
	"runtime"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// The runner as the core's Env (cache.Env): the step broadcast, the collectives, the copy worker and the L3
// goroutines, the local waits under the watchdog, and the content operations on this rank's device memory and
// the shared slab. Everything here runs on the step goroutine but the workers' I/O.

// drainPollInterval is how long a rank waits between two looks at its own work while it drains it: long enough
// to let the workers run on an oversubscribed node, short next to a page copy.
const drainPollInterval = 50 * time.Microsecond

// NextStep is the replicated event stream: CP rank 0 sends each step's events to its group. The core reads it
// one step ahead (cache.Core.Run), so step's events are asked for as step-1 begins: the copy faults of step-1
// are armed now, before any of its copies.
func (rs *runState) NextStep(step int64) ([]workload.Event, error) {
	rs.injectCopyFaults(step - 1)
	return rs.nextStep(step)
}

// Collective carries one of the core's collectives; a rank told to hang or exit at a step does so just before
// that step's consensus.
func (rs *runState) Collective(c *cache.Collective) error {
	rs.paceConsensus(c)
	if c.Kind == cache.StepConsensus {
		rs.injectHangOrExit(c.Step)
		// The core perturbs the placement after this consensus (cache.Config.PerturbAtStep).
		rs.divergenceDue = rs.divergenceDue || rs.opts.InjectDivergence.Hits(rs.job.Topo.WorldRank, c.Step)
	}
	return rs.cons.collective(c)
}

// Start begins a copy (on the copy worker), or an L3 block write or read (on the tier's goroutines). A full queue
// blocks the step under the watchdog's drain slot: a worker stuck in a copy or a filesystem must not hold it
// forever.
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
		rs.enqueue("L3 write queue", "this rank's L3 I/O stopped (a hung filesystem?)", func() bool {
			return offer(t.writeJobs, rs.timedJob(timeline.KindL3Write, int64(len(w.Pages))*rs.pageBytesAllRanks(), func() {
				buf := t.buffer()
				defer t.release(buf)
				t.done.post(t.write(w, buf))
			}))
		})
	case *cache.ExistenceCheck:
		t := rs.l3
		rs.enqueue("L3 read queue", "this rank's L3 I/O stopped (a hung filesystem?)", func() bool {
			return offer(t.readJobs, rs.timedJob(timeline.KindExists, int64(len(w.Keys)), func() { t.done.post(t.check(w)) }))
		})
	case *cache.BlockRead:
		t := rs.l3
		now := time.Now()
		p := &pendingRead{read: w, issued: now, deadline: readDeadline(rs.opts.L3.PrefetchPolicy, w.Tokens, rs.opts.WatchdogTimeout, now)}
		if rs.testBugs.has(bugNoReadDeadline) {
			p.deadline = time.Time{} // the deliberate bug: no read is ever given up
		}
		t.reads[readKey{w.Prefetch, w.Block}] = p
		rs.enqueue("L3 read queue", "this rank's L3 I/O stopped (a hung filesystem?)", func() bool {
			return offer(t.readJobs, rs.timedJob(timeline.KindL3Read, int64(len(w.Pages))*rs.pageBytesAllRanks(), func() { t.done.post(t.read(p)) }))
		})
	}
}

func offer(jobs chan func(), job func()) bool {
	select {
	case jobs <- job:
		return true
	default:
		return false
	}
}

// enqueue retries put until it takes the work, delivering completions meanwhile: it waits on the worker taking the
// next job, bounded by the drain slot (waits.go).
func (rs *runState) enqueue(name, hint string, put func() bool) {
	if put() {
		return
	}
	if rs.tl.On() {
		defer rs.tl.End(timeline.KindWait, rs.tl.Name(name), rs.tl.Now(), 0)
	}
	rs.localWait(name, hint, put)
}

// Wait polls until done: it waits on this rank's own work (copies, L3 I/O), bounded by the drain slot armed under
// the wait's name, so that work that never completes ends the job with that name, however many quick polls the
// wait is made of (waits.go).
func (rs *runState) Wait(r cache.WaitReason, done func() bool) error {
	rs.deliver(false)
	if done() || rs.waitUnbounded(r, done) {
		return nil
	}
	rs.localWait(r.Name, r.Hint, done)
	return nil
}

// Poll hands the core what has finished. The copy worker's goroutine can sit queued behind this one, which is
// locked to its OS thread for MPI; yielding once a step lets it run, as a GPU's copy engine would during the
// forward pass.
func (rs *runState) Poll() {
	runtime.Gosched()
	rs.deliver(false)
}

// deliver hands every finished piece of work to the core, and gives up
// the L3 reads past their deadline as failed; with wait, it first waits a poll interval for something to finish.
func (rs *runState) deliver(wait bool) {
	if wait {
		select {
		case <-rs.done.notify:
		case <-time.After(drainPollInterval):
		}
	}
	rs.doneBuf = rs.done.take(rs.doneBuf)
	for _, d := range rs.doneBuf {
		if d.read != nil && !rs.landRead(&d) {
			continue
		}
		if d.Kind == cache.BlockWritten {
			rs.countWrite(d)
		}
		rs.core.Complete(d.Completion)
	}
	if rs.l3 != nil {
		rs.expireReads(time.Now())
	}
}

// landRead counts a finished read, which its goroutine landed in the slab; false for a read given up at its
// deadline, which the core has already been told of.
func (rs *runState) landRead(d *doneWork) bool {
	t := rs.l3
	r := d.read
	p := t.reads[r.key]
	if p == nil {
		panic(rs.broken("a read of L3 prefetch %d block %d landed that was never issued, or landed twice", r.key.prefetch, r.key.block))
	}
	delete(t.reads, r.key)
	if p.state.Load() == readAbandoned {
		return false
	}
	if r.err != nil {
		rs.io.L3ReadFailures++
		if !t.readFailedSaid && !rs.pass.L3ReadFailuresExpected {
			t.readFailedSaid = true
			t.log.Warn("L3 block read failed: the group computes that block and the rest of its prefetch (counted in l3.read_failures; later failures are not said)", "err", r.err)
		}
		return true
	}
	rs.io.L3Reads++
	rs.io.L3ReadBytes += r.bytes
	rs.readLatency.Observe(r.landed.Sub(p.issued))
	return true
}

// expireReads gives up every read past its deadline: a failed read for the core (the group agrees it as a miss),
// the file named once; its result, when it comes, is dropped.
func (rs *runState) expireReads(now time.Time) {
	t := rs.l3
	for key, p := range t.reads {
		if p.deadline.IsZero() || now.Before(p.deadline) || !p.state.CompareAndSwap(readInFlight, readAbandoned) {
			continue // not due, or landing now: its completion is on its way
		}
		rs.io.L3ReadFailures++
		rs.io.L3ReadTimeouts++
		if !t.timeoutSaid {
			t.timeoutSaid = true
			t.log.Warn("L3 block read given up at its deadline: a miss for the group (counted in l3.read_timeouts; later ones are not said)",
				"file", t.store.BlockPath(p.read.Key), "deadline", p.deadline.Format(time.RFC3339Nano))
		}
		rs.core.Complete(cache.Completion{Kind: cache.BlockReadDone, Seq: key.prefetch, Block: key.block, Err: errReadDeadline})
	}
}

// countWrite tallies a finished block write of this rank.
func (rs *runState) countWrite(x doneWork) {
	switch {
	case x.skipped:
		rs.io.L3WritesSkipped++
	case x.Err == nil:
		if x.writtenBytes > 0 {
			rs.io.L3Writes++
			rs.io.L3WriteBytes += x.writtenBytes
		}
	case isMismatch(x.Err):
		rs.job.Log.Error("L3 block write refused: its L2 parts were not the block's content (counted in l3.write_mismatches; the run fails)", "err", x.Err)
		return
	default:
		rs.io.L3WriteErrors++
		if !rs.l3.writeFailSaid {
			rs.l3.writeFailSaid = true
			rs.l3.log.Warn("L3 block write failed: the block is dropped and the run goes on (counted in l3.write_errors; later failures are not said)", "err", x.Err)
		}
	}
}

// StepDone shows progress and writes the periodic metrics file.
func (rs *runState) StepDone(step int64) {
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

// deviceOffset is where (page, layer, payload) lives in the device KV buffer: [layer][payload][page], so the
// pages of one layer and payload are contiguous, as in a per-layer KV buffer of a serving engine.
func (rs *runState) deviceOffset(page int32, layer, payload int) int64 {
	g := rs.geometry
	return ((int64(layer)*int64(g.PayloadsPerLayer)+int64(payload))*int64(rs.opts.DevicePages) + int64(page)) * rs.partBytes
}

// spansFor builds, per layer, the copies between a copy's device pages and its slots: per payload, in page
// order. Kernels coalesce neighbours that are contiguous on both sides: a payload's consecutive device pages
// are (deviceOffset), and so are its consecutive slots in a layer_first slab, so such a run becomes one copy.
// (Page-major order put the other payload's span between every two, so nothing coalesced: an L2-only replay
// copied parts of a few hundred bytes, each a cache and TLB miss in the slab.)
func (rs *runState) spansFor(w *cache.Copy) [][]kernels.Span {
	g := rs.geometry
	spans := make([][]kernels.Span, g.Layers)
	for layer := range spans {
		spans[layer] = make([]kernels.Span, 0, len(w.DevicePages)*g.PayloadsPerLayer)
		for payload := range g.PayloadsPerLayer {
			for i, page := range w.DevicePages {
				s := w.Slots[i]
				spans[layer] = append(spans[layer], kernels.Span{
					DeviceOffsetBytes: rs.deviceOffset(page, layer, payload),
					Slab:              s.Slab,
					SlabOffsetBytes:   rs.parts.Offset(int(s.Slab), int(s.Slot), rs.job.Topo.NodePart, layer, payload),
					Bytes:             rs.partBytes,
				})
			}
		}
	}
	return spans
}

func (rs *runState) contentKey(rank, layer, payload int) cache.ContentKey {
	return cache.ContentKey{Seed: rs.opts.Seed, Rank: rank, Layer: layer, Payload: payload}
}

// Audit checks a committed object in this node's slab, the node-local parts it names, against the content
// function of the CP rank whose part each is. It reads the slab in its own order, so that the CPU streams it: in
// a layer_first slab an object's consecutive slots hold one part's pages side by side, so part by part, page by
// page within (page by page there, every page's parts were a cache and TLB miss each); in a page_first slab a
// slot holds its parts side by side, so page by page.
func (rs *runState) Audit(a *cache.Audit) bool {
	g := rs.geometry
	ok := true
	check := func(page, part, rank, layer, payload int) {
		s := a.Slots[page]
		off := rs.parts.Offset(int(s.Slab), int(s.Slot), part, layer, payload)
		toks := a.Tokens[page*g.PageTokens : (page+1)*g.PageTokens]
		if !cache.PartMatches(rs.slab.Slabs[s.Slab][off:off+rs.partBytes], toks, a.StartPos+page*g.PageTokens, g.TokenBytes, rs.contentKey(rank, layer, payload)) {
			ok = false
		}
	}
	ranks := rs.job.Topo.NodePartRanks[:a.Parts]
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
