package hicache

import (
	"fmt"
	"math"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
)

// The serving clock (SERVING.md): requests arrive at their trace times, CP rank 0 forms each
// step from its queue by a token budget and broadcasts the step with the earliest time it may begin, and every
// rank spends the step's modelled load and prefill time while the real cache work runs beside it; only what does
// not fit under the model lengthens the step. Every time here is trace time, in nanoseconds since the replay
// began, kept by each rank as a virtual clock: a step lasts its modelled time, or the wall time its real work took
// if that is longer. --time-scale N spends the modelled time at 1/N of its length on the wall, so the replay is
// N times shorter, while the real work's time counts as itself, as it would in a replay at the trace's pace.

// ServingOptions turn the serving clock on; nil in Options replays as fast as the machine allows, as before.
type ServingOptions struct {
	// Prefill chooses the modelled prefill (the roofline of --prefill-model, else --model, on --gpu, or
	// --prefill-profile); Size builds it for the CP size, whose GPUs share each step. Prefill.GPU also gives the
	// host link's rate, and Prefill.Model the KV bytes a token loads.
	Prefill prefill.Options
	// L3ReadBytesPerSecond is one node's L3 read rate (--l3-read-rate).
	L3ReadBytesPerSecond float64
	Batching             serving.Batching
	// TimeScale is the trace seconds that pass in one wall second: 60 replays an hour of trace in a minute, its
	// arrivals and its modelled compute alike. The figures are reported in trace time.
	TimeScale float64
	// RequestRate, when above 0, replaces the workload's arrival times with Poisson arrivals at this many
	// requests per trace second, seeded by --seed (the synthetic workload and token traces have none).
	RequestRate float64
	// GroupGPUs, when above 0, is the modelled CP group's GPUs instead of the run's CP size: sweep runs the cache
	// at cp 1 and models the group the user sizes for (--group-gpus).
	GroupGPUs int
	// Virtual keeps the replay's own pace and steps (--batch-requests, as fast as the machine allows) and only
	// records each request's hits, for a virtual replay at the end: the sweep's modelled TTFT, the same from run
	// to run when the hits are (--sync-copies). Its report has the ideal and no measured figures.
	Virtual bool

	// Built by Size for the CP size: the model, what it is, and the links' rates and bytes.
	model     prefill.Model
	modelName string
	links     serving.Links
	// testPrefill replaces the model (tests only).
	testPrefill serving.Prefill
}

// Check builds the model once for one GPU, so that a bad --gpu, --model, --prefill-efficiency or
// --prefill-profile fails before MPI starts, naming its flag.
func (o *ServingOptions) Check() error {
	p := o.Prefill
	p.GroupGPUs = 1
	if _, err := prefill.New(p); err != nil {
		return err
	}
	if _, err := prefill.LookupGPU(o.Prefill.GPU); err != nil {
		return err
	}
	if err := prefill.CheckL3ReadRate(o.L3ReadBytesPerSecond); err != nil {
		return err
	}
	switch {
	case !(o.TimeScale > 0) || math.IsInf(o.TimeScale, 0):
		return &spmd.ConfigError{Flag: "time-scale", Reason: fmt.Sprintf("%v is not a positive factor", o.TimeScale)}
	case o.RequestRate < 0 || math.IsInf(o.RequestRate, 0) || math.IsNaN(o.RequestRate):
		return &spmd.ConfigError{Flag: "request-rate", Reason: fmt.Sprintf("%v requests/s: give a rate above 0, or 0 for the trace's timestamps", o.RequestRate)}
	case o.Batching.StepTokens < 1:
		return &spmd.ConfigError{Flag: "step-tokens", Reason: fmt.Sprintf("%d must be 1 or more", o.Batching.StepTokens)}
	case o.GroupGPUs < 0:
		return &spmd.ConfigError{Flag: "group-gpus", Reason: fmt.Sprintf("%d must be 1 or more", o.GroupGPUs)}
	case o.Batching.MaxRequests < 1:
		return &spmd.ConfigError{Flag: "step-requests", Reason: fmt.Sprintf("%d must be 1 or more", o.Batching.MaxRequests)}
	}
	return nil
}

// checkArrivals refuses, on CP rank 0, a workload the serving clock cannot time: one with no arrival times (a
// token trace, the synthetic workload) and no --request-rate. A Mooncake trace's requests carry theirs.
func (o *ServingOptions) checkArrivals(events []workload.Event) error {
	if o == nil || o.RequestRate > 0 {
		return nil
	}
	for i := range events {
		if events[i].Request.Blocks.Compact() {
			return nil
		}
	}
	return &spmd.ConfigError{Flag: "request-rate", Reason: "the serving clock needs arrival times and this workload has none (only a Mooncake trace's requests carry them): give a rate in requests per second"}
}

// prefillModel adapts a prefill.Model to the serving clock's interface.
type prefillModel struct{ m prefill.Model }

func (p prefillModel) BatchSeconds(batch []serving.Tokens) float64 {
	reqs := make([]prefill.Request, len(batch))
	for i, t := range batch {
		reqs[i] = prefill.Request{NewTokens: t.New, CachedTokens: t.Cached}
	}
	return p.m.BatchSeconds(reqs)
}

func (o *ServingOptions) prefill() serving.Prefill {
	if o.testPrefill != nil {
		return o.testPrefill
	}
	return prefillModel{o.model}
}

// servingClock is one rank's serving clock. Every rank paces its steps by it; CP rank 0 also forms the steps and
// times each request, since only it holds the arrivals.
type servingClock struct {
	opts       *ServingOptions
	root       bool
	queue      []serving.Queued // CP rank 0's, one per event of rs.events
	lastStart  int64            // CP rank 0: the earliest start of the last step it formed
	startNs    map[int64]int64  // the earliest start of each step received and not yet begun
	stepStart  int64            // the current step's start
	lastEnd    int64            // when the last step ended (its consensus returned), 0 before the first
	computeEnd int64            // when the step's modelled prefill ends
	// The wall: when the current step began (the last one's end, or the end of an idle wait), and when its
	// consensus may begin (its modelled time, scaled); zero once waited for.
	wallStart, paceConsensusAt time.Time

	// CP rank 0's requests: by the step that holds them, and in arrival order for the ideal.
	formed  map[int64][]*requestClock
	pending map[*workload.Request]*requestClock
	inStep  []*requestClock
	order   []*requestClock

	stepsNs, modelledNs int64 // every step's measured span and its modelled cost: the machinery's share
	t                   servingTallies
}

// requestClock is one request's way through the clock, on CP rank 0.
type requestClock struct {
	arrivalNs, firstStartNs, stepStartNs, computeStartNs, computeEndNs int64
	hit                                                                serving.Hit
	flush, served                                                      bool
}

func newServingClock(o *ServingOptions, root bool) *servingClock {
	return &servingClock{opts: o, root: root, startNs: map[int64]int64{}, formed: map[int64][]*requestClock{},
		pending: map[*workload.Request]*requestClock{}}
}

// scaled is how long trace time ns takes on the wall: ns over --time-scale.
func (c *servingClock) scaled(ns int64) time.Duration {
	return time.Duration(float64(ns) / c.opts.TimeScale)
}

// begin starts the clock as the replay begins: trace time 0 is now.
func (c *servingClock) begin() { c.wallStart = time.Now() }

// arrive gives CP rank 0's events their arrival times and builds its queue: the trace's own, or a Poisson
// stream's at --request-rate. Times never go back: a request queues behind the line before it.
func (c *servingClock) arrive(events []workload.Event, seed uint64) {
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
		c.queue[i] = serving.Queued{ArrivalNs: last, PromptTokens: r.PromptTokens(), Flush: events[i].Flush}
	}
}

// form is CP rank 0's step: how many of the queued events form step `step`, formed as the step before it begins
// (serving.VirtualReplay says why), and the earliest time it may begin.
func (c *servingClock) form(events *[]workload.Event) ([]workload.Event, int64) {
	n, startNs := c.opts.Batching.Take(c.queue, max(c.lastEnd, c.lastStart))
	batch := (*events)[:n]
	*events, c.queue = (*events)[n:], c.queue[n:]
	c.lastStart = startNs
	return batch, startNs
}

// received notes a step's batch as every rank decoded it, so that every rank knows when each request was first
// in a step (an L3 read begins then). On CP rank 0 sent holds the same events with their arrival times (the
// broadcast does not carry them).
func (c *servingClock) received(step, startNs int64, batch, sent []workload.Event) {
	c.startNs[step] = startNs
	reqs := make([]*requestClock, len(batch))
	for i := range batch {
		rc := &requestClock{flush: batch[i].Flush}
		if !rc.flush {
			c.pending[&batch[i].Request] = rc
		}
		if c.root {
			rc.arrivalNs = sent[i].Request.ArrivalNs
			c.order = append(c.order, rc)
		}
		reqs[i] = rc
	}
	c.formed[step] = reqs
}

// waitServingLoads names the serving clock's wait for this rank's load-backs before the modelled prefill.
var waitServingLoads = cache.WaitReason{Name: "load wait before the modelled prefill", Hint: "a load-back copy on this rank did not complete"}

// BeginStep waits until the step may begin (an idle group waits for its next arrival), delivering completions
// meanwhile, and takes the step's start.
func (rs *runState) BeginStep(step int64) {
	c := rs.clock
	if c == nil {
		return
	}
	if c.opts.Virtual {
		delete(c.formed, step)
		delete(c.startNs, step)
		return
	}
	// A busy group's step begins where the last one ended, as every rank saw that end right after the step's
	// consensus: the read-ahead broadcast and existence checks since are this step's work, and its deadlines are
	// the same on every rank up to the scheduler's skew (a rank's own later start would make its peers wait).
	c.stepStart = c.lastEnd
	if startNs, ok := c.startNs[step]; ok {
		delete(c.startNs, step)
		if startNs > c.lastEnd {
			rs.paceUntil(c.wallStart.Add(c.scaled(startNs-c.lastEnd)), "serving clock: idle until the step's first arrival")
			c.stepStart, c.wallStart = startNs, time.Now()
		}
	}
	c.computeEnd = c.stepStart // until Served prices the step
	for _, rc := range c.formed[step] {
		rc.firstStartNs = c.stepStart
	}
	delete(c.formed, step)
}

// Served spends the step's modelled time, in a GPU's order: the L3 reads its requests still wait for and their
// load-backs, each at least its modelled time and at least until this rank's real copies finished; then the
// prefill, at its modelled time, while the real copies and L3 I/O go on beside it. The prefill's end is waited
// for just before the step's consensus (paceConsensus): the rank's own checks and local waits before it (the
// load-backs' verification, a throttled drain) run under the modelled compute, as they would beside a GPU.
func (rs *runState) Served(s *cache.ServedStep) {
	c := rs.clock
	if c == nil {
		return
	}
	hits := make([]serving.Hit, len(s.Requests))
	l3Since := c.stepStart // when the step's L3 reads began: with its earliest request's prefetch
	for i, r := range s.Requests {
		o := r.Outcome
		hits[i] = serving.Hit{PromptTokens: o.L1Hit + o.L2Hit + o.L3Hit + o.Computed, L1: o.L1Hit, L2: o.L2Hit, L3: o.L3Hit}
		if rc := c.pending[r.Request]; rc != nil && o.L3Hit > 0 {
			l3Since = min(l3Since, rc.firstStartNs)
		}
	}
	if c.opts.Virtual {
		c.record(s, hits)
		return
	}
	cost := serving.Cost(c.opts.prefill(), c.opts.links, hits)
	l3Left := max(0, l3Since+serving.Nanoseconds(cost.L3ReadSeconds)-c.stepStart)
	// The prefill starts once the modelled loads are over and this rank's real load-backs too. The serve's own
	// work (its fills stand for the GPU computing KV) overlaps the prefill, as on a GPU, not the loads.
	loadEnd := c.stepStart + l3Left + serving.Nanoseconds(cost.LoadSeconds)
	computeStart := loadEnd
	if !s.LoadsDone() {
		rs.paceUntil(c.wallStart.Add(c.scaled(loadEnd-c.stepStart)), "serving clock: modelled L3 reads and load-backs")
		if err := rs.Wait(waitServingLoads, s.LoadsDone); err != nil {
			rs.core.Fail(cache.FailureDevice, err)
		}
		computeStart = max(loadEnd, c.stepStart+time.Since(c.wallStart).Nanoseconds())
	}
	computeEnd := computeStart + serving.Nanoseconds(cost.PrefillSeconds)
	c.computeEnd, c.paceConsensusAt = computeEnd, c.wallStart.Add(c.scaled(computeEnd-c.stepStart))
	for _, rc := range c.record(s, hits) {
		rc.stepStartNs, rc.computeStartNs, rc.computeEndNs = c.stepStart, computeStart, computeEnd
		c.inStep = append(c.inStep, rc)
	}
}

// paceConsensus waits, before the step's consensus, until the modelled prefill of the step ends (scaled).
func (rs *runState) paceConsensus(c *cache.Collective) {
	if clock := rs.clock; clock != nil && c.Kind == cache.StepConsensus && !clock.paceConsensusAt.IsZero() {
		rs.paceUntil(clock.paceConsensusAt, "serving clock: modelled prefill")
		clock.paceConsensusAt = time.Time{}
	}
}

// record keeps, on CP rank 0, what each served request's cache supplied, and returns their clocks; every rank
// forgets them as pending.
func (c *servingClock) record(s *cache.ServedStep, hits []serving.Hit) []*requestClock {
	var out []*requestClock
	for i, r := range s.Requests {
		rc := c.pending[r.Request]
		if rc == nil {
			continue
		}
		delete(c.pending, r.Request)
		if c.root {
			rc.hit, rc.served = hits[i], true
			out = append(out, rc)
		}
	}
	return out
}

// stepEnded times the step's requests to their first token, which the step's end delivers.
func (c *servingClock) stepEnded() {
	if c.opts.Virtual {
		return
	}
	// The step lasted its modelled time, or the wall time its real work took when that was longer: the time it
	// would have lasted at the trace's own pace, whatever --time-scale spent of the modelled part.
	modelled := max(0, c.computeEnd-c.stepStart)
	real := time.Since(c.wallStart).Nanoseconds()
	end := c.stepStart + max(modelled, real)
	c.wallStart, c.lastEnd = time.Now(), end
	c.stepsNs += end - c.stepStart
	c.modelledNs += modelled
	for _, rc := range c.inStep {
		c.t.observe(rc, end)
	}
	c.inStep = c.inStep[:0]
}

// paceUntil waits until the wall time `until`, handing the core whatever finishes meanwhile; the timeline shows
// the wait under name.
func (rs *runState) paceUntil(until time.Time, name string) {
	if time.Until(until) <= 0 {
		return
	}
	if rs.tl.On() {
		defer rs.tl.End(timeline.KindWait, rs.tl.Name(name), rs.tl.Now(), 0)
	}
	for {
		left := time.Until(until)
		if left <= 0 {
			return
		}
		timer := time.NewTimer(left)
		select {
		case <-rs.done.notify:
			rs.deliver(false)
		case <-timer.C:
		}
		timer.Stop()
	}
}

// sized builds the options for a CP group of cp ranks over the nodes of s: the prefill model over its GPUs, the
// links' rates, and the KV bytes a token moves, the model's whole (every layer, payload and rank), not what
// scaled-down copies copy.
func (o *ServingOptions) sized(s *Options, cp int) (*ServingOptions, error) {
	sized := *o
	// The KV of a token is the geometry's every rank's share (or the model's), whatever group is modelled.
	kv := int64(cp) * int64(s.Layers) * int64(s.PayloadsPerLayer) * int64(s.accountTokenBytes)
	if o.GroupGPUs > 0 {
		cp = o.GroupGPUs
	}
	sized.Prefill.GroupGPUs = cp
	gpu, err := prefill.LookupGPU(o.Prefill.GPU)
	if err != nil {
		return nil, err
	}
	if o.testPrefill == nil {
		if sized.model, err = prefill.New(sized.Prefill); err != nil {
			return nil, err
		}
		sized.modelName = sized.model.Describe()
	}
	if m, err := sizing.LookupModel(o.Prefill.Model); err == nil {
		kv = m.TokenBytes()
	}
	sized.links = serving.Links{HostBytesPerSecond: gpu.H2DBytesPerSecond, L3BytesPerSecond: o.L3ReadBytesPerSecond,
		KVBytesPerToken: kv, GPUs: cp, Nodes: s.groupNodes}
	return &sized, nil
}

// breakEven is the summary's lines on where each tier pays (prefill.SummaryLines), for prefixes of a few
// lengths; none with a test model.
func (o *ServingOptions) breakEven() []string {
	if o.model == nil {
		return nil
	}
	l := o.links
	return prefill.SummaryLines(o.model, l.KVBytesPerToken, []int64{4096, 32768},
		prefill.TierRates{L2HostBytesPerSecond: l.HostBytesPerSecond * float64(l.GPUs), L3ReadBytesPerSecond: l.L3BytesPerSecond * float64(l.Nodes)})
}
