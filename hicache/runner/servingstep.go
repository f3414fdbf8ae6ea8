package runner

import (
	"fmt"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/serving"
)

// One step on the serving clock: BeginStep, Served, paceConsensus, stepEnded, in the order the core
// calls them. The step's modelled time is serving.PlanStep's, the same function the ideal's virtual
// clock prices its steps with, so the two differ only by what the real machinery adds.

// holdsDeferred says whether requests formed before step wait to be served: the core serves the
// requests it deferred for their prefetch at the start of the next step. Every rank knows (the
// deferral is replicated).
func (c *servingClock) holdsDeferred(step int64) bool {
	for _, rc := range c.pending {
		if rc.step < step {
			return true
		}
	}
	return false
}

// planStep prices step's input (serving.PlanStep). A plan whose modelled time no run can spend
// (serving.StepPlan.Check) would hang the run, spent on the wall (at a host link of 5 bytes/s, a
// load-back of 83 years): it fails the step instead, priced at no cost so that nothing waits for it.
// Every rank prices the same step, so every rank fails it, at the step's consensus.
func (rs *runState) planStep(step int64, in serving.StepInput) serving.StepPlan {
	plan := serving.PlanStep(rs.clock.prefill, rs.clock.opts.Links, in)
	if err := plan.Check(); err != nil {
		rs.core.Fail(cache.FailureModel, fmt.Errorf("step %d: %w", step, err))
		return serving.PlanStep(noCost{}, serving.Links{}, in)
	}
	return plan
}

// noCost is a prefill that costs nothing: a failed step's.
type noCost struct{}

func (noCost) BatchSeconds([]serving.Tokens) float64 { return 0 }

// paceConsensus waits, before the step's consensus, until the modelled prefill of the step ends
// (scaled).
func (rs *runState) paceConsensus(c *cache.Collective) {
	if clock := rs.clock; clock != nil && c.Kind == cache.StepConsensus &&
		!clock.paceConsensusAt.IsZero() {
		clock.lateNs += rs.paceUntil(clock.paceConsensusAt, "serving clock: modelled prefill")
		clock.paceConsensusAt = time.Time{}
	}
}

// record keeps, on CP rank 0, what each served request's cache supplied and whether it waited a
// step for its prefetch, and returns their clocks by the step's requests (nil on the other ranks);
// every rank forgets them as pending.
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

// stepEndNs is the end of a step that began at startNs, on the trace's clock: its modelled time, or
// the wall time its real work took (wallNs since its start, less lateNs that its paced waits woke
// late: the node's scheduler, not the work) when that was longer; and by how much the real work
// overran the model.
func stepEndNs(startNs, modelledNs, wallNs, lateNs int64) (endNs, overrunNs int64) {
	realNs := max(0, wallNs-lateNs)
	endNs = startNs + max(modelledNs, realNs)
	return endNs, endNs - (startNs + modelledNs)
}

// stepEnded times the step's requests to their first token, which their pass's end delivers.
func (c *servingClock) stepEnded() {
	if c.root {
		c.ran = append(c.ran, ranStep{formed: c.thisStep, twoPasses: c.twoPasses})
	}
	if c.opts.Virtual {
		c.virtualStepEnded()
		return
	}
	// The step lasted its modelled time, or the wall time its real work took when that was longer:
	// the time it would have lasted at the trace's own pace, whatever --time-scale spent of the
	// modelled part. What the real work overran the model by delays every first token of the step.
	modelled := max(0, c.computeEnd-c.stepStart)
	end, overrun := stepEndNs(
		c.stepStart,
		modelled,
		time.Since(c.wallStart).Nanoseconds(),
		c.lateNs,
	)
	c.wallStart, c.lastEnd, c.lateNs = time.Now(), end, 0
	// The wait between a step's two passes is idle time, not step time: the machinery's share
	// leaves it out.
	c.stepsNs += end - c.stepStart - c.idleNs
	c.modelledNs += modelled - c.idleNs
	var ends []int64
	for _, rc := range c.inStep {
		rc.firstTokenNs = rc.computeEndNs + overrun
		c.t.observe(rc, rc.firstTokenNs)
		ends = append(ends, rc.firstTokenNs)
	}
	c.inStep = c.inStep[:0]
	// the clients learn their first tokens: CP rank 0 forms the step after next with them
	if c.loop != nil {
		c.loop.FirstTokens(ends)
	}
}

// virtualStepEnded ends a step of a virtual clock (config.ServingOptions.Virtual): it lasted its
// modelled time exactly, whatever the wall took, so the next step is formed as the serving clock
// would form it with a machinery that costs nothing. Its requests are timed by the virtual replay
// at the end (replayIdeal), which this clock's steps equal; the clients learn their first tokens
// here, so that they send as that replay's do.
func (c *servingClock) virtualStepEnded() {
	c.lastEnd = max(c.computeEnd, c.stepStart)
	c.wallStart, c.lateNs = time.Now(), 0
	var ends []int64
	for _, rc := range c.inStep {
		rc.firstTokenNs = rc.computeEndNs
		ends = append(ends, rc.firstTokenNs)
	}
	c.inStep = c.inStep[:0]
	if c.loop != nil {
		c.loop.FirstTokens(ends)
	}
}
