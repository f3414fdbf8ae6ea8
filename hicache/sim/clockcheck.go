package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/serving"
)

// The serving clock's checks (SIMSERVING.md). Each step, on CP
// rank 0, the charges of what its core served (checkCharges): a request's compute waits at least
// for its own L3 read and load-backs at the modelled rates, a longer cached prefix is never charged
// more than the same request with a shorter one (and, where the model charges every new token more
// than a cached one, strictly less), and the same tokens from a slower tier are never charged less.
// At the end of each group that ran to its end, CP rank 0's record and steps replayed on
// serving.ReplaySteps (the ideal: the run's own steps at no cost) against the run (checkClock):
// equal up to the first step where the machinery cost something, later than the ideal in that
// step, and the ideal a floor for every request. The same record on serving.VirtualReplay (the
// sweep's clock, which forms its steps anew) forms and times the run's steps alike up to the first
// costly step; after it a request may beat it, which is counted, not a violation. Every rank got CP
// rank 0's batches (clockstep.go).

// ClockTally is what the serving clock's checks compared, summed over a run.
type ClockTally struct {
	Jobs     int   // groups whose record was replayed and compared
	Requests int64 // requests compared with the ideal
	// requests equal to the ideal to the nanosecond (before the first step the machinery cost
	// something), and groups whose first such step delivered a first token later than the ideal
	Equal, CostShown int64
	// requests held to the ideal as a floor (every one), and requests whose TTFT on the virtual
	// replay that forms its own steps (the sweep's clock) was later than the run's: after the
	// clocks first formed a step of other requests (BreaksFormed), or first passed a step alike
	// formed differently (BreaksPassed), the reason a run's ideal replays the run's own steps
	Floors, BreaksFormed, BreaksPassed int64
	// charges compared: a longer L1 prefix, strictly cheaper ones, a slower tier; requests whose
	// loads were held to their own reads and load-backs; L1 variants left unchecked because
	// the request's pass ran in more than one forward pass (chunked prefill)
	Longer, Strict, Slower, LoadFloors, Chunked int64
	// the shapes the run's steps took: requests computed in chunks, steps of two passes, steps
	// formed empty (every client waiting for a first token), and steps the machinery cost something
	ChunkedRequests, TwoPassSteps, EmptySteps, CostlySteps int64
}

func (t *ClockTally) add(o ClockTally) {
	t.Jobs += o.Jobs
	t.Requests += o.Requests
	t.Equal += o.Equal
	t.CostShown += o.CostShown
	t.Floors += o.Floors
	t.BreaksFormed += o.BreaksFormed
	t.BreaksPassed += o.BreaksPassed
	t.Longer += o.Longer
	t.Strict += o.Strict
	t.Slower += o.Slower
	t.LoadFloors += o.LoadFloors
	t.Chunked += o.Chunked
	t.ChunkedRequests += o.ChunkedRequests
	t.TwoPassSteps += o.TwoPassSteps
	t.EmptySteps += o.EmptySteps
	t.CostlySteps += o.CostlySteps
}

// newTokens is what a hit leaves to compute, as the serving clock must charge it: the prompt less
// its cached prefix, at least its last token (PREFILL.md, "Hits").
func newTokens(h serving.Hit) int64 {
	return h.PromptTokens - min(h.L1+h.L2+h.L3, h.PromptTokens-1)
}

// checkCharges checks the charges of the step just priced (free: its plan with a machinery that
// costs nothing; in: its input) on CP rank 0.
func (c *rankClock) checkCharges(free serving.StepPlan, in serving.StepInput) {
	t := &c.r.g.j.served
	for i, rc := range c.clocks {
		if rc == nil {
			continue
		}
		h := in.Batch
		if c.deferred[i] {
			h = in.Deferred
		}
		hit := h[c.slot[i]]
		pass, own := free.Request(c.deferred[i], c.slot[i])
		// A deferred request's L3 hit was read by its prefetch, begun with the step it was formed
		// into. Another request's L3 hit may be a node some earlier prefetch read (its first
		// load-back is the L3's), its read long done: only its load-backs bound it.
		l, read := c.m.links, int64(0)
		if c.deferred[i] {
			read = rc.firstStartNs + serving.Nanoseconds(l.L3ReadSeconds(hit.L3))
		}
		floor := max(pass.StartNs, read) + serving.Nanoseconds(l.LoadSeconds(hit.L2+hit.L3))
		t.LoadFloors++
		if pass.ComputeStartNs < floor {
			c.violate(rc, fmt.Sprintf(
				"its prefill starts at %d ns, before its own L3 read (%d tokens, ending at %d ns if deferred) and load-backs (%d tokens) allow, %d ns",
				pass.ComputeStartNs, hit.L3, read, hit.L2+hit.L3, floor))
			return
		}
		c.checkVariants(free, in, i, hit, own)
	}
}

// checkVariants prices request i's step again with its hit changed, and compares its first token:
// a longer L1 prefix (one simulated token more, and its whole L1 hit, than the same request with
// them computed) is never later, and strictly earlier where the model charges every new token more
// than a cached one, while its pass runs in one forward pass either way (with chunked prefill the
// next request's tokens fill what the shorter computation leaves of a forward pass: a pass of other
// tokens, which may cost more; SIMSERVING.md); the same tokens from a slower tier (L1 from the L2,
// L2 from the L3) are never earlier.
func (c *rankClock) checkVariants(
	free serving.StepPlan,
	in serving.StepInput,
	i int,
	hit serving.Hit,
	own serving.Chunks,
) {
	t := &c.r.g.j.served
	pass, _ := free.Request(c.deferred[i], c.slot[i])
	price := func(v serving.Hit) (serving.Pass, serving.Chunks) {
		vin := in
		hs := &vin.Batch
		if c.deferred[i] {
			hs = &vin.Deferred
		}
		*hs = append([]serving.Hit(nil), *hs...)
		(*hs)[c.slot[i]] = v
		return serving.PlanStep(c.m.prefill, c.m.links, vin).Request(c.deferred[i], c.slot[i])
	}
	for _, d := range []int64{c.m.cfg.TokenScale, hit.L1} {
		if hit.L1 == 0 || d > hit.L1 {
			continue
		}
		short := hit
		short.L1 -= d
		vpass, v := price(short)
		if pass.Forwards > 1 || vpass.Forwards > 1 {
			t.Chunked++
			continue
		}
		t.Longer++
		strict := c.m.strict && newTokens(short) > newTokens(hit)
		if v.FirstTokenNs < own.FirstTokenNs || strict && v.FirstTokenNs == own.FirstTokenNs {
			c.violate(c.clocks[i], fmt.Sprintf(
				"a longer cached prefix is charged more: its first token at %d ns with hits %+v, at %d ns with %d tokens fewer from the L1 (computed instead; %s)",
				own.FirstTokenNs, hit, v.FirstTokenNs, d,
				map[bool]string{true: "the model charges a new token more than a cached one: want strictly later", false: "want no earlier"}[strict]))
			return
		}
		if strict {
			t.Strict++
		}
	}
	for _, slower := range []serving.Hit{
		{PromptTokens: hit.PromptTokens, L1: 0, L2: hit.L1 + hit.L2, L3: hit.L3},
		{PromptTokens: hit.PromptTokens, L1: hit.L1, L2: 0, L3: hit.L2 + hit.L3},
	} {
		if slower == hit {
			continue
		}
		t.Slower++
		if _, v := price(slower); v.FirstTokenNs < own.FirstTokenNs {
			c.violate(c.clocks[i], fmt.Sprintf(
				"the same tokens from a slower tier are charged less: its first token at %d ns with hits %+v, at %d ns with %+v",
				own.FirstTokenNs, hit, v.FirstTokenNs, slower))
			return
		}
	}
}

// violate reports a broken serving-clock property of request rc on this rank (nil: of the group's
// clock as a whole).
func (c *rankClock) violate(rc *reqClock, what string) {
	who := "the group's record"
	if rc != nil {
		who = fmt.Sprintf("the event %d of the record", rc.index)
	}
	c.r.g.j.violate(c.r, fmt.Sprintf("serving clock, %s: %s", who, what))
}

// checkClocks runs checkClock on every group of a serving-clock job that ran to its end.
func (j *job) checkClocks() {
	if j.clock == nil {
		return
	}
	for _, g := range j.groups {
		if j.violation != nil {
			return
		}
		ran := true
		for _, r := range g.ranks {
			ran = ran && r.err == nil
		}
		if ran {
			g.checkClock()
		}
	}
}

// checkClock replays CP rank 0's record and steps at no cost, the ideal, and on the virtual clock
// that forms its own steps, and compares the run with both (the file's comment says what).
func (g *group) checkClock() {
	c, j := g.ranks[0].clock, g.j
	records := make([]serving.Record, len(c.order))
	measured := make([]serving.Timing, len(c.order))
	for i, rc := range c.order {
		if !rc.served && !rc.flush {
			c.violate(rc, "never served in a group that ran to its end")
			return
		}
		records[i] = serving.Record{
			ArrivalNs: rc.arrivalNs,
			Hit:       rc.hit,
			Flush:     rc.flush,
			Deferred:  rc.deferred,
		}
		measured[i] = rc.timing()
	}
	m := c.m
	steps := make([]serving.FormedStep, len(c.steps))
	for k, s := range c.steps {
		steps[k] = serving.FormedStep{Records: len(s.formed), TwoPasses: s.twoPasses}
	}
	ideal, err := serving.ReplaySteps(records, steps, m.batching, m.prefill, m.links)
	if err != nil {
		c.violate(nil, fmt.Sprintf("CP rank 0's steps do not replay: %v", err))
		return
	}
	reformed := serving.VirtualReplay(records, m.batching, m.prefill, m.links, m.clients)
	if cache.BugsCompiled && j.cfg.Bugs.Has(cache.BugIdealFromMeasured) {
		copy(ideal.Requests, measured) // the deliberate bug: the run's own clock for the ideal
	}
	if cache.BugsCompiled && j.cfg.Bugs.Has(cache.BugIdealFormsOwnSteps) {
		ideal = reformed // the deliberate bug: the ideal forms its own steps, as a sweep's clock
	}
	j.served.Jobs++
	costly := len(c.steps)
	alike, formed := g.alikeSteps(reformed)
	for k, s := range c.steps {
		if s.costly {
			costly = k
			break
		}
	}
	if alike < min(costly+1, len(c.steps)) {
		c.violate(nil, fmt.Sprintf(
			"the run and the virtual replay formed or passed step %d differently, before the machinery cost anything (from step %d)",
			alike+1, costly+1))
		return
	}
	breaks := &j.served.BreaksPassed
	if !formed {
		breaks = &j.served.BreaksFormed
	}
	g.compareWithIdeal(records, measured, ideal, reformed, costly, breaks)
}

// alikeSteps is how many of the run's first steps the ideal formed of the same records and passed
// alike (one pass, or the deferred requests' pass first), and whether the first step that differs
// was formed alike (false: of other records).
func (g *group) alikeSteps(ideal serving.Replay) (alike int, formedAlike bool) {
	c := g.ranks[0].clock
	formed := make([][]int, ideal.Steps)
	for i, s := range ideal.StepOf {
		if s < len(formed) {
			formed[s] = append(formed[s], i)
		}
	}
	for k, s := range c.steps {
		if k >= ideal.Steps || len(formed[k]) != len(s.formed) {
			return k, false
		}
		for i := range s.formed {
			if formed[k][i] != s.formed[i] {
				return k, false
			}
		}
		if ideal.TwoPasses[k] != s.twoPasses {
			return k, true
		}
	}
	return len(c.steps), true
}

// compareWithIdeal holds each request's time on the run's clock to its ideal's: equal before the
// step the machinery first cost something (costly), and the virtual replay's too; later there for
// some request it delivered; and no earlier than the ideal anywhere, its first token and its TTFT.
// A request that beats the virtual replay (after a step formed later, holding more arrivals at one
// weight read, or passed in one where the virtual replay ran two: SIMSERVING.md) is counted in
// breaks.
func (g *group) compareWithIdeal(
	records []serving.Record,
	measured []serving.Timing,
	ideal, reformed serving.Replay,
	costly int,
	breaks *int64,
) {
	c, t := g.ranks[0].clock, &g.j.served
	shown := costly >= len(c.steps) || len(c.steps[costly].timed) == 0
	for i, rc := range c.order {
		if records[i].Flush {
			continue
		}
		t.Requests++
		run, want := measured[i], ideal.Requests[i]
		step := int(rc.step) - 1 // the step that delivered its first token
		if rc.deferred {
			step++
		}
		switch {
		case step < costly && (run != want || run != reformed.Requests[i]):
			c.violate(rc, fmt.Sprintf(
				"before the machinery cost anything (step %d) the run's timing %+v differs from the ideal's %+v or the virtual replay's %+v",
				costly+1, run, want, reformed.Requests[i]))
			return
		case step < costly:
			t.Equal++
		case step == costly && run.EndNs > want.EndNs:
			shown = true
		}
		t.Floors++
		if want.EndNs > run.EndNs || want.TTFTNs() > run.TTFTNs() {
			c.violate(rc, fmt.Sprintf(
				"the ideal is no floor: its first token at %d ns (TTFT %d ns), the run's at %d ns (TTFT %d ns), over the same steps",
				want.EndNs, want.TTFTNs(), run.EndNs, run.TTFTNs()))
			return
		}
		if reformed.Requests[i].TTFTNs() > run.TTFTNs() {
			*breaks++
		}
	}
	if !shown {
		c.violate(c.order[c.steps[costly].timed[0]], fmt.Sprintf(
			"step %d, the first the machinery cost something, delivered every first token as early as the ideal: the ideal is the run's own clock",
			costly+1))
		return
	}
	if costly < len(c.steps) && len(c.steps[costly].timed) > 0 {
		t.CostShown++
	}
}
