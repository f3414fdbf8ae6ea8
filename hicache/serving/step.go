package serving

// A request whose prefix continues in the L3 is served one step after the step it was formed into:
// its prefetch starts in that step and the step's consensus agrees which blocks arrived, so every
// rank serves it from the same blocks (DESIGN.md, "The L3 tier"). That is the design's rule, not
// the machinery's cost, so both clocks keep it: the run's, which measures, and the virtual one,
// whose ideal then differs from the run only by what the machinery costs. PlanStep is the one place
// that prices such a step; both clocks call it.

// Pass is one forward pass of the modelled GPUs: it begins, loads (the L3 reads still waited for,
// the load-backs), computes from ComputeStartNs, and its requests' first tokens come at EndNs.
type Pass struct {
	StartNs, ComputeStartNs, EndNs int64
}

// StepPlan is one step on the modelled clock: the pass of the requests the step before kept waiting
// for their prefetch (Deferred), and the pass of the step's own requests (Batch). Most steps have
// one pass, Batch, with every request of the step in it; a step whose own requests arrive after the
// group is free, with requests waiting for their prefetch, has two: those are served at once, as an
// engine would run a step of them rather than hold them until the next arrival, and the step's own
// requests when they come.
type StepPlan struct {
	Deferred, Batch Pass
	TwoPasses       bool
}

// EndNs is when the step's last pass ends.
func (p StepPlan) EndNs() int64 { return p.Batch.EndNs }

// PassOf is the pass that served a request: a deferred one's, or the step's own (every request's in
// a step of one pass).
func (p StepPlan) PassOf(deferred bool) Pass {
	if deferred && p.TwoPasses {
		return p.Deferred
	}
	return p.Batch
}

// IdleNs is the time between the step's two passes, when the group waited for the step's own
// requests.
func (p StepPlan) IdleNs() int64 {
	if !p.TwoPasses {
		return 0
	}
	return max(0, p.Batch.StartNs-p.Deferred.EndNs)
}

// StepInput is what PlanStep prices. Times are trace nanoseconds.
type StepInput struct {
	// FreeNs is when the group is free: the last step's end.
	FreeNs int64
	// BatchStartNs is the earliest time the step's own requests allow it to begin (Batching.Take's
	// start).
	BatchStartNs int64
	// Deferred are the hits of the requests the step before kept waiting for their prefetch, served
	// now; their L3 reads began at DeferredSinceNs (the start of that step's pass).
	Deferred        []Hit
	DeferredSinceNs int64
	// Batch are the hits of the step's own requests served in it (not those it defers to the next
	// step).
	Batch []Hit
	// LoadsReadyNs is when the real load-backs finished (the run's clock; 0 on the virtual one): no
	// pass computes before it.
	LoadsReadyNs int64
}

// PlanStep prices a step in a GPU's order (Cost): each pass waits for the L3 reads its requests
// still need (counted from when they began, so a deferred request has already spent part of its
// read), then the load-backs, then computes.
func PlanStep(p Prefill, l Links, in StepInput) StepPlan {
	start := max(in.FreeNs, in.BatchStartNs)
	if len(in.Deferred) == 0 || in.BatchStartNs <= in.FreeNs {
		// One pass: the deferred requests join the step's own.
		hits := append(
			append(make([]Hit, 0, len(in.Deferred)+len(in.Batch)), in.Deferred...),
			in.Batch...)
		since := start
		if len(in.Deferred) > 0 {
			since = min(since, in.DeferredSinceNs)
		}
		batch := pass(p, l, hits, start, since, in.LoadsReadyNs)
		return StepPlan{
			Deferred: Pass{StartNs: start, ComputeStartNs: start, EndNs: start},
			Batch:    batch,
		}
	}
	deferred := pass(
		p,
		l,
		in.Deferred,
		in.FreeNs,
		min(in.FreeNs, in.DeferredSinceNs),
		in.LoadsReadyNs,
	)
	start = max(in.BatchStartNs, deferred.EndNs)
	return StepPlan{
		Deferred:  deferred,
		Batch:     pass(p, l, in.Batch, start, start, in.LoadsReadyNs),
		TwoPasses: true,
	}
}

// pass prices one pass of hits beginning at startNs whose L3 reads began at sinceNs.
func pass(p Prefill, l Links, hits []Hit, startNs, sinceNs, loadsReadyNs int64) Pass {
	cost := Cost(p, l, hits)
	l3Left := max(0, sinceNs+Nanoseconds(cost.L3ReadSeconds)-startNs)
	computeStart := max(startNs+l3Left+Nanoseconds(cost.LoadSeconds), loadsReadyNs)
	return Pass{
		StartNs:        startNs,
		ComputeStartNs: computeStart,
		EndNs:          computeStart + Nanoseconds(cost.PrefillSeconds),
	}
}
