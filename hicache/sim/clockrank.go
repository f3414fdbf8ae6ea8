package sim

import (
	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// rankClock is one simulated rank's serving clock, the runner's servingClock (hicache/runner's
// servingclock.go and servingstep.go) with the scheduler's ticks for its wall: every rank keeps
// one, CP rank 0's forms the steps and times the requests. Its times are trace nanoseconds.
type rankClock struct {
	m    *clockModel
	r    *rank
	root bool
	// this clock's view of the group's events not yet formed into a step, and their queue (a
	// rank's own queue: only CP rank 0's forms steps, but for the deliberate bug
	// batch_from_own_queue every rank's does)
	events []workload.Event
	queue  []serving.Queued
	loop   *serving.ClosedLoop
	all    []workload.Event // with clients: the events, sent as the loop says
	sent   int              // with clients: the events queued of those sent
	// the earliest start of the last step formed; when the last step ended
	lastStart, lastEnd int64
	startNs            map[int64]int64 // each step received and not yet begun: its earliest start
	formed             map[int64][]*reqClock
	pending            map[*workload.Request]*reqClock
	thisStep, inStep   []*reqClock
	order              []*reqClock // CP rank 0: every event received, in order (the record)
	// the current step: its start, its own requests' earliest start, and the tick its wall began
	// (the last step's end, or its start after an idle wait)
	stepStart, batchStart int64
	wallTick              uint64
	in                    serving.StepInput // Served's, priced at the step's end
	clocks                []*reqClock
	deferred              []bool
	slot                  []int
	loadsDone             func() bool // the step's load-backs, while they were not done at Served
	loadsTick             uint64      // the tick they were seen done (0: done at Served)
	steps                 []stepClock // CP rank 0: by step from 1 (index step-1)
}

// reqClock is one event's way through the clock (a flush's too, for the record's order).
type reqClock struct {
	index int   // in the record (CP rank 0)
	step  int64 // the step it was formed into
	// its times on this rank's clock, as the runner's requestClock's
	arrivalNs, firstStartNs, stepStartNs, computeStartNs, computeEndNs, firstTokenNs int64
	hit                                                                              serving.Hit
	flush, served, deferred                                                          bool
	chunks                                                                           int
}

func (rc *reqClock) timing() serving.Timing {
	return serving.Timing{
		ArrivalNs:      rc.arrivalNs,
		FirstStartNs:   rc.firstStartNs,
		StartNs:        rc.stepStartNs,
		ComputeStartNs: rc.computeStartNs,
		EndNs:          rc.firstTokenNs,
		Chunks:         rc.chunks,
	}
}

// stepClock is one step on CP rank 0's clock, as the checks compare it with the ideal's.
type stepClock struct {
	formed    []int // the record's events formed into it
	received  bool  // formed by CP rank 0 (not a step of deferred requests past the stream's end)
	twoPasses bool
	// costly: the machinery cost the step something (a load-back later than the model's, or an
	// overrun), so that its first tokens come later than the model's
	costly bool
	timed  []int // the requests whose first token it delivered
}

// newRankClock starts rank r's clock over its group's events (arrivals: nil with clients).
func newRankClock(m *clockModel, r *rank, events []workload.Event, arrivals []int64) *rankClock {
	c := &rankClock{
		m:       m,
		r:       r,
		root:    r.cp == 0,
		events:  events,
		startNs: map[int64]int64{},
		formed:  map[int64][]*reqClock{},
		pending: map[*workload.Request]*reqClock{},
	}
	if m.clients.N > 0 {
		flush := make([]bool, len(events))
		for i := range events {
			flush[i] = events[i].Flush
		}
		c.all, c.loop = events, serving.NewClosedLoop(m.clients, flush)
		c.sendArrivals()
		return c
	}
	c.queue = make([]serving.Queued, len(events))
	var last int64
	for i := range events {
		last = max(last, arrivals[i]) // times never go back: a request queues behind the one before
		c.queue[i] = m.queued(&events[i], last)
	}
	return c
}

// queued is an event as the queue holds it: its prompt in model tokens.
func (m *clockModel) queued(e *workload.Event, arrivalNs int64) serving.Queued {
	return serving.Queued{
		ArrivalNs:    arrivalNs,
		PromptTokens: e.Request.PromptTokens() * m.cfg.TokenScale,
		Flush:        e.Flush,
	}
}

// sendArrivals queues the events the clients sent since the last call.
func (c *rankClock) sendArrivals() {
	for ; c.sent < c.loop.Sent(); c.sent++ {
		c.queue = append(c.queue, c.m.queued(&c.all[c.sent], c.loop.ArrivalNs(c.sent)))
	}
}

// form is the runner's servingClock.form: the events of the next step, formed as the step before
// it begins, with their queue entries and the step's earliest start. nil ends the stream; an empty
// batch is a step with nothing sent yet (every client waits for a first token).
func (c *rankClock) form() (batch []workload.Event, queued []serving.Queued, startNs int64) {
	if c.loop != nil {
		c.sendArrivals()
	}
	n, startNs := c.m.batching.Take(c.queue, max(c.lastEnd, c.lastStart))
	if n == 0 {
		if len(c.events) == 0 {
			return nil, nil, 0
		}
		startNs = c.lastEnd // an empty step begins when the group is free
	}
	batch, queued = c.events[:n:n], c.queue[:n:n]
	c.events, c.queue = c.events[n:], c.queue[n:]
	c.lastStart = startNs
	return batch, queued, startNs
}

// received notes a step's batch as this rank got it (its own copy: the core keys requests by
// address); on CP rank 0 queued holds its arrivals.
func (c *rankClock) received(step, startNs int64, batch []workload.Event, queued []serving.Queued) {
	c.startNs[step] = startNs
	reqs := make([]*reqClock, len(batch))
	sc := stepClock{}
	for i := range batch {
		rc := &reqClock{step: step, flush: batch[i].Flush}
		if !rc.flush {
			c.pending[&batch[i].Request] = rc
		}
		if c.root {
			rc.index, rc.arrivalNs = len(c.order), queued[i].ArrivalNs
			sc.formed = append(sc.formed, rc.index)
			c.order = append(c.order, rc)
		}
		reqs[i] = rc
	}
	c.formed[step] = reqs
	if c.root {
		s := c.stepAt(step)
		s.formed, s.received = sc.formed, true
	}
}

// stepAt is CP rank 0's record of step (from 1), grown as steps come.
func (c *rankClock) stepAt(step int64) *stepClock {
	for int64(len(c.steps)) < step {
		c.steps = append(c.steps, stepClock{})
	}
	return &c.steps[step-1]
}

// holdsDeferred says whether requests formed before step wait to be served (replicated).
func (c *rankClock) holdsDeferred(step int64) bool {
	for _, rc := range c.pending {
		if rc.step < step {
			return true
		}
	}
	return false
}

// begin is the runner's BeginStep: a busy group's step begins where the last one ended; an idle
// group's, with no request deferred to it, when its first request arrives (the wall's idle wait
// is no machinery's time).
func (c *rankClock) begin(step int64) {
	c.thisStep = c.formed[step]
	delete(c.formed, step)
	c.stepStart, c.batchStart = c.lastEnd, c.lastEnd
	if startNs, ok := c.startNs[step]; ok {
		delete(c.startNs, step)
		c.batchStart = max(startNs, c.lastEnd)
		if startNs > c.lastEnd && !c.holdsDeferred(step) {
			c.stepStart, c.wallTick = startNs, c.r.g.j.now
		}
	}
}

// served is the runner's Served, less its waits: the step's input and its requests' clocks, priced
// at the step's end (ended) once this rank's load-backs are known done.
func (c *rankClock) served(s *cache.ServedStep) {
	var hits []serving.Hit
	c.in, hits, c.deferred, c.slot = c.stepInput(s)
	c.clocks = c.record(s, hits)
	c.loadsDone, c.loadsTick = nil, 0
	if !s.LoadsDone() {
		c.loadsDone = s.LoadsDone
	}
}

// polled notes the tick at which this rank's load-backs of the step were all done.
func (c *rankClock) polled() {
	if c.loadsDone != nil && c.loadsDone() {
		c.loadsDone, c.loadsTick = nil, c.r.g.j.now
	}
}

// stepInput is the runner's: each request's hits (in model tokens), and whether the step before
// deferred it, with its place in the input's Deferred or Batch.
func (c *rankClock) stepInput(
	s *cache.ServedStep,
) (in serving.StepInput, hits []serving.Hit, deferred []bool, slot []int) {
	k := c.m.cfg.TokenScale
	hits = make([]serving.Hit, len(s.Requests))
	in = serving.StepInput{
		FreeNs:          c.stepStart,
		BatchStartNs:    c.batchStart,
		DeferredSinceNs: c.batchStart,
		ChunkTokens:     c.m.batching.StepTokens,
	}
	deferred, slot = make([]bool, len(s.Requests)), make([]int, len(s.Requests))
	for i, r := range s.Requests {
		o := r.Outcome
		hits[i] = serving.Hit{
			PromptTokens: (o.L1Hit + o.L2Hit + o.L3Hit + o.Computed) * k,
			L1:           o.L1Hit * k,
			L2:           o.L2Hit * k,
			L3:           o.L3Hit * k,
		}
		var firstStartNs int64
		if rc := c.pending[r.Request]; rc != nil && rc.step < s.Step {
			deferred[i], firstStartNs = true, rc.firstStartNs
		}
		slot[i] = in.Add(hits[i], deferred[i], firstStartNs)
	}
	return in, hits, deferred, slot
}

// record is the runner's: what each served request's cache supplied, and whether it waited a step.
func (c *rankClock) record(s *cache.ServedStep, hits []serving.Hit) []*reqClock {
	out := make([]*reqClock, len(s.Requests))
	for i, r := range s.Requests {
		rc := c.pending[r.Request]
		if rc == nil {
			continue
		}
		delete(c.pending, r.Request)
		rc.hit, rc.served, rc.deferred = hits[i], true, rc.step < s.Step
		out[i] = rc
	}
	return out
}

// ended prices the step and times its requests (the runner's Served and stepEnded in one): the
// step lasts its modelled time (serving.PlanStep, the prefill held back by a load-back seen done
// after its model's time), or its ticks of machinery when longer, and what it overran by delays
// every first token of the step.
func (c *rankClock) ended(step int64) {
	now, tick := c.r.g.j.now, c.m.tickNs
	free := serving.PlanStep(c.m.prefill, c.m.links, c.in) // the machinery costing nothing
	plan, in := free, c.in
	if c.loadsTick > 0 || c.loadsDone != nil {
		done := c.loadsTick
		if c.loadsDone != nil { // not seen done (a failed group): done now
			done = now
		}
		in.LoadsReadyNs = c.stepStart + int64(done-c.wallTick)*tick
		plan = serving.PlanStep(c.m.prefill, c.m.links, in)
	}
	for _, rc := range c.thisStep {
		rc.firstStartNs = plan.Batch.StartNs // the step's own requests began with its pass
	}
	for i, rc := range c.clocks {
		if rc != nil {
			p, own := plan.Request(c.deferred[i], c.slot[i])
			rc.stepStartNs, rc.computeStartNs = p.StartNs, p.ComputeStartNs
			rc.computeEndNs, rc.chunks = own.FirstTokenNs, own.Chunks
			c.inStep = append(c.inStep, rc)
		}
	}
	modelled := max(0, plan.EndNs()-c.stepStart)
	end := c.stepStart + max(modelled, int64(now-c.wallTick)*tick)
	overrun := end - (c.stepStart + modelled)
	c.lastEnd, c.wallTick = end, now
	var ends []int64
	for _, rc := range c.inStep {
		rc.firstTokenNs = rc.computeEndNs + overrun
		ends = append(ends, rc.firstTokenNs)
	}
	if c.root {
		c.checkCharges(free, c.in)
		c.noteStep(step, plan, overrun > 0 || !samePlan(plan, free))
	}
	c.inStep, c.clocks = c.inStep[:0], nil
	if c.loop != nil {
		c.loop.FirstTokens(ends) // CP rank 0 forms the step after next with them
	}
}

// noteStep keeps CP rank 0's step for the checks at the end, and counts the shapes it took.
func (c *rankClock) noteStep(step int64, plan serving.StepPlan, costly bool) {
	t, sc := &c.r.g.j.served, c.stepAt(step)
	sc.twoPasses, sc.costly = plan.TwoPasses, costly
	for _, rc := range c.inStep {
		sc.timed = append(sc.timed, rc.index)
		if rc.chunks > 1 {
			t.ChunkedRequests++
		}
	}
	switch {
	case plan.TwoPasses:
		t.TwoPassSteps++
	case sc.received && len(sc.formed) == 0:
		t.EmptySteps++
	}
	if costly {
		t.CostlySteps++
	}
}

// samePlan says whether two plans of one step time every pass alike.
func samePlan(a, b serving.StepPlan) bool {
	same := func(x, y serving.Pass) bool {
		return x.StartNs == y.StartNs && x.ComputeStartNs == y.ComputeStartNs && x.EndNs == y.EndNs
	}
	return a.TwoPasses == b.TwoPasses && same(a.Deferred, b.Deferred) && same(a.Batch, b.Batch)
}
