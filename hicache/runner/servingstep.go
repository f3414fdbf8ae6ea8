package runner

import (
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/serving"
)

// One step on the serving clock: BeginStep, Served, paceConsensus, stepEnded, in the order the core calls them.
// The step's modelled time is serving.PlanStep's, the same function the ideal's virtual clock prices its steps
// with, so the two differ only by what the real machinery adds.

// BeginStep waits until the step may begin (an idle group waits for its next arrival), delivering completions
// meanwhile, and takes the step's start. A group that still holds requests deferred for their L3 prefetch does
// not wait: it serves them at once (serving.StepPlan's first pass), and the step's own requests when they arrive.
func (rs *runState) BeginStep(step int64) {
	c := rs.clock
	if c == nil {
		return
	}
	c.thisStep = c.formed[step]
	delete(c.formed, step)
	if c.opts.Virtual {
		delete(c.startNs, step)
		return
	}
	// A busy group's step begins where the last one ended, as every rank saw that end right after the step's
	// consensus: the read-ahead broadcast and existence checks since are this step's work, and its deadlines are
	// the same on every rank up to the scheduler's skew (a rank's own later start would make its peers wait).
	c.stepStart, c.batchStart = c.lastEnd, c.lastEnd
	if startNs, ok := c.startNs[step]; ok {
		delete(c.startNs, step)
		c.batchStart = max(startNs, c.lastEnd)
		if startNs > c.lastEnd && !c.holdsDeferred(step) {
			rs.paceUntil(c.wallStart.Add(c.scaled(startNs-c.lastEnd)), "serving clock: idle until the step's first arrival")
			c.stepStart, c.wallStart, c.lateNs = startNs, time.Now(), 0
		}
	}
	c.computeEnd, c.idleNs = c.stepStart, 0 // until Served prices the step
}

// holdsDeferred says whether requests formed before step wait to be served: the core serves the requests it
// deferred for their prefetch at the start of the next step. Every rank knows (the deferral is replicated).
func (c *servingClock) holdsDeferred(step int64) bool {
	for _, rc := range c.pending {
		if rc.step < step {
			return true
		}
	}
	return false
}

// Served spends the step's modelled time (serving.PlanStep), in a GPU's order: the L3 reads its requests still
// wait for and their load-backs, each at least its modelled time and at least until this rank's real copies
// finished; then the prefill, at its modelled time, while the real copies and L3 I/O go on beside it. The
// prefill's end is waited for just before the step's consensus (paceConsensus): the rank's own checks and local
// waits before it (the load-backs' verification, a throttled drain) run under the modelled compute, as they
// would beside a GPU.
func (rs *runState) Served(s *cache.ServedStep) {
	c := rs.clock
	if c == nil {
		return
	}
	hits := make([]serving.Hit, len(s.Requests))
	in := serving.StepInput{FreeNs: c.stepStart, BatchStartNs: c.batchStart, DeferredSinceNs: c.batchStart}
	deferred := make([]bool, len(s.Requests))
	for i, r := range s.Requests {
		o := r.Outcome
		hits[i] = serving.Hit{PromptTokens: o.L1Hit + o.L2Hit + o.L3Hit + o.Computed, L1: o.L1Hit, L2: o.L2Hit, L3: o.L3Hit}
		if rc := c.pending[r.Request]; rc != nil && rc.step < s.Step {
			deferred[i] = true
			in.Deferred = append(in.Deferred, hits[i])
			in.DeferredSinceNs = min(in.DeferredSinceNs, rc.firstStartNs)
		} else {
			in.Batch = append(in.Batch, hits[i])
		}
	}
	clocks := c.record(s, hits)
	if c.opts.Virtual {
		return
	}
	plan := serving.PlanStep(c.prefill, c.opts.Links, in)
	first := plan.PassOf(true) // the step's first pass
	// The prefill starts once the modelled loads are over and this rank's real load-backs too. The serve's own
	// work (its fills stand for the GPU computing KV) overlaps the prefill, as on a GPU, not the loads.
	if !s.LoadsDone() {
		c.lateNs += rs.paceUntil(c.wallStart.Add(c.scaled(first.ComputeStartNs-c.stepStart)), "serving clock: modelled L3 reads and load-backs")
		if err := rs.Wait(waitServingLoads, s.LoadsDone); err != nil {
			rs.core.Fail(cache.FailureDevice, err)
		}
		in.LoadsReadyNs = c.stepStart + max(0, time.Since(c.wallStart).Nanoseconds()-c.lateNs)
		plan = serving.PlanStep(c.prefill, c.opts.Links, in)
	}
	c.computeEnd, c.idleNs = plan.EndNs(), plan.IdleNs()
	c.paceConsensusAt = c.wallStart.Add(c.scaled(c.computeEnd - c.stepStart))
	for _, rc := range c.thisStep {
		rc.firstStartNs = plan.Batch.StartNs // the step's own requests, those it defers too, began with its pass
	}
	for i, rc := range clocks {
		if rc != nil {
			p := plan.PassOf(deferred[i])
			rc.stepStartNs, rc.computeStartNs, rc.computeEndNs = p.StartNs, p.ComputeStartNs, p.EndNs
			c.inStep = append(c.inStep, rc)
		}
	}
}

// paceConsensus waits, before the step's consensus, until the modelled prefill of the step ends (scaled).
func (rs *runState) paceConsensus(c *cache.Collective) {
	if clock := rs.clock; clock != nil && c.Kind == cache.StepConsensus && !clock.paceConsensusAt.IsZero() {
		clock.lateNs += rs.paceUntil(clock.paceConsensusAt, "serving clock: modelled prefill")
		clock.paceConsensusAt = time.Time{}
	}
}

// record keeps, on CP rank 0, what each served request's cache supplied and whether it waited a step for its
// prefetch, and returns their clocks by the step's requests (nil on the other ranks); every rank forgets them as
// pending.
func (c *servingClock) record(s *cache.ServedStep, hits []serving.Hit) []*requestClock {
	out := make([]*requestClock, len(s.Requests))
	for i, r := range s.Requests {
		rc := c.pending[r.Request]
		if rc == nil {
			continue
		}
		delete(c.pending, r.Request)
		if c.root {
			rc.hit, rc.served, rc.deferred = hits[i], true, rc.step < s.Step
			out[i] = rc
		}
	}
	return out
}

// stepEndNs is the end of a step that began at startNs, on the trace's clock: its modelled time, or the wall time
// its real work took (wallNs since its start, less lateNs that its paced waits woke late: the node's scheduler,
// not the work) when that was longer; and by how much the real work overran the model.
func stepEndNs(startNs, modelledNs, wallNs, lateNs int64) (endNs, overrunNs int64) {
	realNs := max(0, wallNs-lateNs)
	endNs = startNs + max(modelledNs, realNs)
	return endNs, endNs - (startNs + modelledNs)
}

// stepEnded times the step's requests to their first token, which their pass's end delivers.
func (c *servingClock) stepEnded() {
	if c.opts.Virtual {
		return
	}
	// The step lasted its modelled time, or the wall time its real work took when that was longer: the time it
	// would have lasted at the trace's own pace, whatever --time-scale spent of the modelled part. What the real
	// work overran the model by delays every first token of the step.
	modelled := max(0, c.computeEnd-c.stepStart)
	end, overrun := stepEndNs(c.stepStart, modelled, time.Since(c.wallStart).Nanoseconds(), c.lateNs)
	c.wallStart, c.lastEnd, c.lateNs = time.Now(), end, 0
	// The wait between a step's two passes is idle time, not step time: the machinery's share leaves it out.
	c.stepsNs += end - c.stepStart - c.idleNs
	c.modelledNs += modelled - c.idleNs
	var ends []int64
	for _, rc := range c.inStep {
		c.t.observe(rc, rc.computeEndNs+overrun)
		ends = append(ends, rc.computeEndNs+overrun)
	}
	c.inStep = c.inStep[:0]
	if c.loop != nil { // the clients learn their first tokens: CP rank 0 forms the step after next with them
		c.loop.FirstTokens(ends)
	}
}
