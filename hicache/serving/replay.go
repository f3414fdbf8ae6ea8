package serving

import (
	"math"
	"slices"
)

// Record is one event of a replica's replay as the virtual clock replays it: a request's arrival
// and what its cache supplied, or a flush. Deferred: the request waited a step for its L3 prefetch
// (PlanStep), as the run served it.
type Record struct {
	ArrivalNs int64
	Hit       Hit
	Flush     bool
	Deferred  bool
}

// Timing is one request's way to its first token, in trace time: it arrived, waited in the queue
// until its step began (FirstStartNs), for its prefetch if deferred until the pass that served it
// began (StartNs), for its loads (L3 reads, load-backs) and then for the prefill, whose end is its
// first token: the end of the forward pass that computed its last new token, after Chunks forward
// passes of its own (more than 1: chunked prefill, Chunk).
type Timing struct {
	ArrivalNs, FirstStartNs, StartNs, ComputeStartNs, EndNs int64
	Chunks                                                  int
}

// TTFTNs is the request's time to first token.
func (t Timing) TTFTNs() int64 { return t.EndNs - t.ArrivalNs }

// Replay is a virtual replay's outcome: every request's timing, in the order of the records, and
// its steps.
type Replay struct {
	Requests []Timing
	Steps    int
	// BusyNs is the time the group's GPUs spent in its steps (their loads and forward passes, the
	// wait between a step's two passes left out): the prompt tokens over it are what the group
	// serves at these hits when it is never idle, its capacity.
	BusyNs int64
	// StepOf is, by record, the step (from 0) it was formed into (a deferred request is served in
	// the next); TwoPasses, by step, whether it served the requests deferred to it in a pass of
	// their own (StepPlan.TwoPasses). The simulator sets them beside the run's own steps: the ideal
	// is a floor for a request whose steps up to its own both clocks formed and passed alike.
	StepOf    []int
	TwoPasses []bool
}

// FormNextAtStart is the rule both clocks form steps by: the batch of step k+1 is formed as step k
// begins, from the requests queued by then, while step k's compute runs (as SGLang's overlap
// scheduler prepares the next batch during the forward pass), and step k+1 begins when step k ends,
// or at its first request's arrival if later. The runner forms it so because its core reads the
// event stream one step ahead (for the L3's existence checks). With closed-loop clients a step may
// find nothing sent yet (every client waits for a first token of the step that runs): it is an
// empty step, which serves the requests deferred to it, if any.
//
// VirtualReplay replays records on a clock whose cache machinery costs nothing: each step takes
// exactly its modelled time (PlanStep, its forward passes chunked by b.StepTokens as the run's
// are), a deferred request served in the step after its own, each request's first token at the
// end of the forward pass that computed its last new token. The records arrive at their ArrivalNs,
// or, with clients (Clients.N above 0), as the clients send them on this clock. Over a run's own
// hit record it is that run's ideal; over a sweep's, its modelled TTFT.
func VirtualReplay(records []Record, b Batching, p Prefill, l Links, clients Clients) Replay {
	a := newVirtualArrivals(records, clients)
	r := newReplayer(records, b.StepTokens, p, l, func(j int) int64 { return a.queue[j].ArrivalNs })
	var formNs int64
	var firstTokens [][]int64 // by step, the first tokens the clients do not know of yet
	for i := 0; i < len(records) || len(r.deferred) > 0; {
		// Step k+1 is formed as step k begins: it knows the first tokens of the steps before step
		// k.
		for ; len(firstTokens) > 1; firstTokens = firstTokens[1:] {
			a.firstTokens(firstTokens[0])
		}
		// Past the last record the core gives the requests still waiting steps of their own.
		n, batchStart := 0, r.freeNs
		if i < a.sent() {
			n, batchStart = b.Take(a.queue[i:a.sent()], formNs)
		} else if i < len(records) && len(r.deferred) == 0 && len(firstTokens) == 0 {
			break // nothing sent, nothing to come: cannot happen with a client or more
		}
		// The next step is formed as this one's own requests may begin: the run's CP rank 0 forms
		// it before this step runs, so it cannot know when a pass of deferred requests ends.
		formNs = max(r.freeNs, batchStart)
		firstTokens = append(firstTokens, r.step(i, n, batchStart, ShapeByArrival))
		i += n
	}
	return r.out
}

// replayer is a replay's state from step to step, whichever way its steps are formed
// (VirtualReplay, ReplaySteps).
type replayer struct {
	records     []Record
	arrivalNs   func(j int) int64 // record j's arrival on this clock
	chunkTokens int64
	p           Prefill
	l           Links
	out         Replay
	// the group is free at freeNs; the records the last step kept waiting for their prefetch,
	// whose reads began at deferredSinceNs
	freeNs, deferredSinceNs int64
	deferred                []int
}

func newReplayer(
	records []Record,
	chunkTokens int64,
	p Prefill,
	l Links,
	arrivalNs func(int) int64,
) *replayer {
	return &replayer{
		records:     records,
		arrivalNs:   arrivalNs,
		chunkTokens: chunkTokens,
		p:           p,
		l:           l,
		out:         Replay{Requests: make([]Timing, len(records)), StepOf: make([]int, len(records))},
	}
}

// step serves records [i, i+n) as the next step, whose own requests may begin at batchStartNs,
// with the requests the step before deferred, passed in shape; it times them all and returns the
// first tokens it delivered.
func (r *replayer) step(i, n int, batchStartNs int64, shape Shape) (firstTokensNs []int64) {
	in := StepInput{
		FreeNs:          r.freeNs,
		BatchStartNs:    batchStartNs,
		DeferredSinceNs: r.deferredSinceNs,
		ChunkTokens:     r.chunkTokens,
		Shape:           shape,
	}
	for _, j := range r.deferred {
		in.Deferred = append(in.Deferred, r.records[j].Hit)
	}
	var waiting []int
	for j := i; j < i+n; j++ {
		switch {
		case r.records[j].Flush:
		case r.records[j].Deferred:
			waiting = append(waiting, j)
		default:
			in.Batch = append(in.Batch, r.records[j].Hit)
		}
	}
	plan := PlanStep(r.p, r.l, in)
	for k, j := range r.deferred {
		pass, c := plan.Request(true, k)
		r.out.Requests[j] = timing(r.arrivalNs(j), r.deferredSinceNs, pass, c)
		firstTokensNs = append(firstTokensNs, r.out.Requests[j].EndNs)
	}
	own := 0 // the step's own requests served in it, in in.Batch's order
	for j := i; j < i+n; j++ {
		r.out.StepOf[j] = r.out.Steps
		// a flush, or a request deferred to the next step, which will time it
		pass, c := plan.Batch, Chunks{FirstTokenNs: plan.Batch.EndNs}
		if !r.records[j].Flush && !r.records[j].Deferred {
			pass, c = plan.Request(false, own)
			own++
			firstTokensNs = append(firstTokensNs, c.FirstTokenNs)
		}
		r.out.Requests[j] = timing(r.arrivalNs(j), plan.Batch.StartNs, pass, c)
	}
	r.out.BusyNs += plan.EndNs() - plan.PassOf(true).StartNs - plan.IdleNs()
	r.out.TwoPasses = append(r.out.TwoPasses, plan.TwoPasses)
	r.deferred, r.deferredSinceNs = waiting, plan.Batch.StartNs
	r.freeNs = plan.EndNs()
	r.out.Steps++
	return firstTokensNs
}

// virtualArrivals are the records' arrivals as the virtual clock learns them: all at once, or as
// the clients send them.
type virtualArrivals struct {
	queue []Queued // the records sent so far (all without clients), in order
	loop  *ClosedLoop
	hits  []Record
}

func newVirtualArrivals(records []Record, clients Clients) *virtualArrivals {
	a := &virtualArrivals{hits: records}
	if clients.N <= 0 {
		for _, r := range records {
			a.queue = append(
				a.queue,
				Queued{ArrivalNs: r.ArrivalNs, PromptTokens: r.Hit.PromptTokens, Flush: r.Flush},
			)
		}
		return a
	}
	flush := make([]bool, len(records))
	for i, r := range records {
		flush[i] = r.Flush
	}
	a.loop = NewClosedLoop(clients, flush)
	a.firstTokens(nil)
	return a
}

func (a *virtualArrivals) sent() int { return len(a.queue) }

// firstTokens tells the clients of first tokens, and queues what they send.
func (a *virtualArrivals) firstTokens(endsNs []int64) {
	if a.loop == nil {
		return
	}
	a.loop.FirstTokens(endsNs)
	for j := len(a.queue); j < a.loop.Sent(); j++ {
		r := a.hits[j]
		a.queue = append(
			a.queue,
			Queued{
				ArrivalNs:    a.loop.ArrivalNs(j),
				PromptTokens: r.Hit.PromptTokens,
				Flush:        r.Flush,
			},
		)
	}
}

// timing is a request's way through the pass that served it, its step having first begun at
// firstStartNs, with its own chunks c.
func timing(arrivalNs, firstStartNs int64, p Pass, c Chunks) Timing {
	return Timing{
		ArrivalNs:      arrivalNs,
		FirstStartNs:   firstStartNs,
		StartNs:        p.StartNs,
		ComputeStartNs: p.ComputeStartNs,
		EndNs:          c.FirstTokenNs,
		Chunks:         c.Chunks,
	}
}

// Nanoseconds converts modelled seconds to nanoseconds of trace time, rounded up: a cost is never
// free. A cost past int64's nanoseconds (292 years), or NaN, is the longest one, math.MaxInt64:
// Go's conversion of a float out of range is the implementation's (math.MinInt64 on amd64, a
// negative cost that would make the step end before it began); StepPlan.Check refuses such a
// step.
func Nanoseconds(seconds float64) int64 {
	ns := math.Ceil(seconds * 1e9)
	if !(ns < math.MaxInt64) {
		return math.MaxInt64
	}
	return int64(ns)
}

// addNs is a + b, held at math.MaxInt64: a time plus a cost Nanoseconds held there stays the
// longest time rather than wrapping to a negative one.
func addNs(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Summary is a replay's serving figures over its requests (flushes left out).
type Summary struct {
	Requests                  int
	TTFTP50, TTFTP90, TTFTP99 float64 // seconds
	// prompt tokens over the span from the first arrival to the last first token
	PromptTokensPerSecond float64
}

// Summarize reads a replay's figures. records and timings go together.
func Summarize(records []Record, timings []Timing) Summary {
	ttft := make([]int64, 0, len(timings))
	var prompt, first, last int64
	first = math.MaxInt64
	for i, t := range timings {
		if records[i].Flush {
			continue
		}
		ttft = append(ttft, t.TTFTNs())
		prompt += records[i].Hit.PromptTokens
		first, last = min(first, t.ArrivalNs), max(last, t.EndNs)
	}
	s := Summary{Requests: len(ttft)}
	if len(ttft) == 0 {
		return s
	}
	slices.Sort(ttft)
	s.TTFTP50, s.TTFTP90, s.TTFTP99 = quantileSeconds(
		ttft,
		0.50,
	), quantileSeconds(
		ttft,
		0.90,
	), quantileSeconds(
		ttft,
		0.99,
	)
	if span := last - first; span > 0 {
		s.PromptTokensPerSecond = float64(prompt) / (float64(span) / 1e9)
	}
	return s
}

// Quantile reads the p-quantile, in seconds, of ascending nanoseconds: NearestRank exactly, or as
// the report reads its percentiles (report.SortedSeconds, its histogram bucket's upper bound) where
// the figure is printed beside them.
type Quantile func(sortedNs []int64, p float64) float64

// NearestRank is the exact p-quantile of sorted nanoseconds (the nearest-rank method), in seconds.
func NearestRank(sortedNs []int64, p float64) float64 { return quantileSeconds(sortedNs, p) }

// quantileSeconds is the q-quantile of sorted nanoseconds (the nearest rank), in seconds.
func quantileSeconds(sorted []int64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)]) / 1e9
}
