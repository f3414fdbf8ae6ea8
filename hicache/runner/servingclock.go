package runner

import (
	"errors"
	"math"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
)

// The serving clock (SERVING.md): requests arrive at their trace times, CP rank 0 forms each step
// from its queue by a token budget and broadcasts the step with the earliest time it may begin, and
// every rank spends the step's modelled load and prefill time while the real cache work runs beside
// it; only what does not fit under the model lengthens the step. Every time here is trace time, in
// nanoseconds since the replay began, kept by each rank as a virtual clock: a step lasts its
// modelled time, or the wall time its real work took if that is longer. --time-scale N spends the
// modelled time at 1/N of its length on the wall, so the replay is N times shorter, while the real
// work's time counts as itself, as it would in a replay at the trace's pace.

// prefillModel adapts a prefill.Model to the serving clock's interface.
type prefillModel struct{ m prefill.Model }

func (p prefillModel) BatchSeconds(batch []serving.Tokens) float64 {
	reqs := make([]prefill.Request, len(batch))
	for i, t := range batch {
		reqs[i] = prefill.Request{NewTokens: t.New, CachedTokens: t.Cached}
	}
	return p.m.BatchSeconds(reqs)
}

// prefill is the step costs' model: a test's own, or the sized options'
// (config.ServingOptions.PrefillModel), which a command's options always have.
func (rs *runState) prefill() (serving.Prefill, error) {
	if rs.testing.Prefill != nil {
		return rs.testing.Prefill, nil
	}
	if rs.opts.Serving.PrefillModel == nil {
		return nil, errors.New(
			"the serving clock has no prefill model: its options name no --prefill-model or --prefill-profile",
		)
	}
	return prefillModel{rs.opts.Serving.PrefillModel}, nil
}

// servingClock is one rank's serving clock. Every rank paces its steps by it; CP rank 0 also forms
// the steps and times each request, since only it holds the arrivals.
type servingClock struct {
	opts    *config.ServingOptions
	prefill serving.Prefill // the step costs' model
	root    bool
	queue   []serving.Queued // CP rank 0's, one per event of rs.events sent
	loop    *serving.ClosedLoop
	// CP rank 0's whole workload, whose arrivals the clients set as they send
	all       []workload.Event
	lastStart int64 // CP rank 0: the earliest start of the last step it formed
	// CP rank 0: the events of each step it formed, for the ideal hit count
	stepEvents []int
	// CP rank 0 with clients: the events queued of those the clients sent
	sent      int
	startNs   map[int64]int64 // the earliest start of each step received and not yet begun
	stepStart int64           // the current step's start: when the group was free for it
	// the earliest start of the current step's own requests (Batching.Take's)
	batchStart int64
	thisStep   []*requestClock // the current step's own requests (and flushes)
	// when the last step ended (its consensus returned), 0 before the first
	lastEnd    int64
	computeEnd int64 // when the step's modelled prefill ends
	idleNs     int64 // the current step's wait between its two passes (serving.StepPlan)
	// the current step served its deferred requests in a pass of their own (serving.StepPlan)
	twoPasses bool
	// The wall: when the current step began (the last one's end, or the end of an idle wait), and
	// when its consensus may begin (its modelled time, scaled); zero once waited for.
	wallStart, paceConsensusAt time.Time
	// lateNs: how much later than their targets the step's paced waits woke. A loaded node wakes a
	// sleeper late (on 2 cores under 4 ranks, about a millisecond a wait); a GPU's compute does not
	// end late for it.
	lateNs int64

	// CP rank 0's requests: by the step that holds them, and in arrival order for the ideal.
	formed  map[int64][]*requestClock
	pending map[*workload.Request]*requestClock
	inStep  []*requestClock
	order   []*requestClock
	// CP rank 0: every step that ended, as it was formed and passed, for the ideal (replayIdeal)
	ran []ranStep

	// every step's measured span and its modelled cost: the machinery's share
	stepsNs, modelledNs int64
	// CP rank 0 of a virtual replay: its figures over the modelled L3, and its load
	withL3 *report.ModelledL3Serving
	load   *report.ServingLoad
	// CP rank 0: the ideal's requests, records, steps (a run's) and replay (replayIdeal), which
	// the per-rank copies and the load replay again
	idealClocks  []*requestClock
	idealRecords []serving.Record
	idealSteps   []serving.FormedStep
	idealReplay  serving.Replay
	t            servingTallies
}

// ranStep is one step as CP rank 0's clock formed and passed it: its own events (requests and
// flushes), and whether it served the requests deferred to it in a pass of their own.
type ranStep struct {
	formed    []*requestClock
	twoPasses bool
}

// requestClock is one request's way through the clock, on CP rank 0.
type requestClock struct {
	rid string // the request's id (a Mooncake request's: its line number), for a message
	// the step it was formed into
	step                                                               int64
	arrivalNs, firstStartNs, stepStartNs, computeStartNs, computeEndNs int64
	hit                                                                serving.Hit
	flush, served, deferred                                            bool
	// the forward passes its new tokens spanned: more than 1 when chunked (serving.Chunk)
	chunks int
	// its first token on the run's clock: its forward pass's end and what the step overran by
	firstTokenNs int64
}

// record is the request as the ideal replays it: its arrival, its hits, and whether it waited a
// step for its prefetch. A request its step formed but did not serve (deferred, or left by a
// failure) was not in the step's pass: the ideal leaves it out of it too.
func (rc *requestClock) record() serving.Record {
	return serving.Record{
		ArrivalNs: rc.arrivalNs,
		Hit:       rc.hit,
		Flush:     rc.flush,
		Deferred:  rc.deferred || !rc.served && !rc.flush,
	}
}

// timing is the request's way to its first token on the run's clock.
func (rc *requestClock) timing() serving.Timing {
	return serving.Timing{
		ArrivalNs:      rc.arrivalNs,
		FirstStartNs:   rc.firstStartNs,
		StartNs:        rc.stepStartNs,
		ComputeStartNs: rc.computeStartNs,
		EndNs:          rc.firstTokenNs,
		Chunks:         rc.chunks,
	}
}

func newServingClock(o *config.ServingOptions, root bool, prefill serving.Prefill) *servingClock {
	return &servingClock{
		opts:    o,
		root:    root,
		prefill: prefill,
		startNs: map[int64]int64{},
		formed:  map[int64][]*requestClock{},
		pending: map[*workload.Request]*requestClock{},
	}
}

// scaled is how long trace time ns takes on the wall: ns over --time-scale, held within a
// Duration's range. A tiny --time-scale (1e-300) makes a wait longer than any Duration: it is the
// longest one (292 years), not a conversion that overflows into a negative time, which would wait
// not at all.
func (c *servingClock) scaled(ns int64) time.Duration {
	d := float64(ns) / c.opts.TimeScale
	switch {
	case d >= math.MaxInt64:
		return math.MaxInt64
	case d <= math.MinInt64:
		return math.MinInt64
	}
	return time.Duration(d)
}

// begin starts the clock as the replay begins: trace time 0 is now.
func (c *servingClock) begin() { c.wallStart, c.lateNs = time.Now(), 0 }

// arrive gives CP rank 0's events their arrival times and builds its queue: the trace's own, or a
// Poisson stream's at --request-rate. Times never go back: a request queues behind the line before
// it. With closed-loop clients (--clients) an event arrives when a client sends it (sendArrivals).
func (c *servingClock) arrive(events []workload.Event, seed uint64) {
	if c.opts.Clients > 0 {
		flush := make([]bool, len(events))
		for i := range events {
			flush[i] = events[i].Flush
		}
		c.all, c.loop = events, serving.NewClosedLoop(c.opts.ClosedLoop(), flush)
		c.sendArrivals()
		return
	}
	var rate []int64
	if c.opts.RequestRate > 0 {
		rate = serving.PoissonArrivalsNs(len(events), c.opts.RequestRate, seed)
	}
	c.queue = make([]serving.Queued, len(events))
	var last int64
	for i := range events {
		r := &events[i].Request
		if rate != nil {
			r.ArrivalNs = rate[i]
		}
		last = max(last, r.ArrivalNs)
		r.ArrivalNs = last
		c.queue[i] = serving.Queued{
			ArrivalNs:    last,
			PromptTokens: r.PromptTokens(),
			Flush:        events[i].Flush,
		}
	}
}

// sendArrivals queues the events the clients sent since the last call, at the times they sent them.
func (c *servingClock) sendArrivals() {
	for ; c.sent < c.loop.Sent(); c.sent++ {
		e := &c.all[c.sent]
		e.Request.ArrivalNs = c.loop.ArrivalNs(c.sent)
		c.queue = append(
			c.queue,
			serving.Queued{
				ArrivalNs:    e.Request.ArrivalNs,
				PromptTokens: e.Request.PromptTokens(),
				Flush:        e.Flush,
			},
		)
	}
}

// form is CP rank 0's step: how many of the queued events form step `step`, formed as the step
// before it begins (serving.VirtualReplay says why), and the earliest time it may begin. nil ends
// the stream; an empty batch is a step with nothing sent yet (closed-loop clients all waiting for a
// first token).
func (c *servingClock) form(events *[]workload.Event) ([]workload.Event, int64) {
	if c.loop != nil {
		c.sendArrivals()
	}
	n, startNs := c.opts.Batching.Take(c.queue, max(c.lastEnd, c.lastStart))
	c.stepEvents = append(c.stepEvents, n)
	if n == 0 {
		if len(*events) == 0 {
			return nil, 0
		}
		startNs = c.lastEnd // an empty step begins when the group is free
	}
	batch := (*events)[:n:n]
	*events, c.queue = (*events)[n:], c.queue[n:]
	c.lastStart = startNs
	return batch, startNs
}

// received notes a step's batch as every rank decoded it, so that every rank knows when each
// request was first in a step (an L3 read begins then). On CP rank 0 sent holds the same events
// with their arrival times (the broadcast does not carry them).
func (c *servingClock) received(step, startNs int64, batch, sent []workload.Event) {
	c.startNs[step] = startNs
	reqs := make([]*requestClock, len(batch))
	for i := range batch {
		rc := &requestClock{step: step, flush: batch[i].Flush}
		if !rc.flush {
			c.pending[&batch[i].Request] = rc
		}
		if c.root {
			rc.arrivalNs, rc.rid = sent[i].Request.ArrivalNs, sent[i].Request.RID
			c.order = append(c.order, rc)
		}
		reqs[i] = rc
	}
	c.formed[step] = reqs
}

// waitServingLoads names the serving clock's wait for this rank's load-backs before the modelled
// prefill.
var waitServingLoads = cache.WaitReason{
	Name: "load wait before the modelled prefill",
	Hint: "a load-back copy on this rank did not complete",
}

// paceUntil waits until the wall time `until`, handing the core whatever finishes meanwhile; the
// timeline shows the wait under name. It returns how late its timer woke it: the scheduler's delay
// past `until`. A delivery that ran past `until` is the step's real work, not lateness: then 0.
func (rs *runState) paceUntil(until time.Time, name string) (lateNs int64) {
	if time.Until(until) <= 0 {
		return 0
	}
	if rs.tl.On() {
		defer rs.tl.End(timeline.KindWait, rs.tl.Name(name), rs.tl.Now(), 0)
	}
	for {
		left := time.Until(until)
		if left <= 0 {
			return 0
		}
		timer := time.NewTimer(left)
		select {
		case <-rs.done.notify:
			timer.Stop()
			rs.deliver(false)
		case <-timer.C:
			return max(0, time.Since(until).Nanoseconds())
		}
	}
}
