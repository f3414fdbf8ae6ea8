package serving

import (
	"math/rand/v2"
	"testing"
)

// weightsPrefill charges a forward pass a fixed time (its weights' read, whatever its batch) and a
// time per computed and per cached token: a pass over more requests is cheaper per request, which
// is what lets a later step beat a clock that forms its own.
type weightsPrefill struct{ passSeconds, newSeconds, cachedSeconds float64 }

func (m weightsPrefill) BatchSeconds(batch []Tokens) float64 {
	if len(batch) == 0 {
		return 0
	}
	s := m.passSeconds
	for _, t := range batch {
		s += float64(t.New)*m.newSeconds + float64(t.Cached)*m.cachedSeconds
	}
	return s
}

// stepCost is what a costly machinery adds to step k (from 0): how long after the step's start its
// real load-backs were done (0: in time), and how far its real work overran the model.
type stepCost func(k int) (loadsReadyAfterNs, overrunNs int64)

// costlyRun is the runner's serving clock in miniature (its servingClock form, BeginStep, Served
// and stepEnded), written apart from the replays it tests: CP rank 0 forms step k+1 as step k
// begins, at the later of step k-1's end and step k's start (Take), with the first tokens of the
// steps before step k told to the clients; a busy group's step begins where the last
// one ended, an idle one's at its first arrival unless requests were deferred to it; PlanStep
// prices it by the rule, its prefill held back until its load-backs were ready; it ends its
// overrun after its model, every first token it delivered that much later. It returns every
// record's timing on its clock and the steps as it formed and passed them.
func costlyRun(
	records []Record,
	b Batching,
	p Prefill,
	l Links,
	c Clients,
	cost stepCost,
) ([]Timing, []FormedStep) {
	a := newVirtualArrivals(records, c)
	measured := make([]Timing, len(records))
	var steps []FormedStep
	// lastEnd is the last step's end, formedEnd the end of the step before it, when the step
	// being served now was formed
	var lastEnd, formedEnd, lastStart, deferredSince int64
	var deferred []int
	var told [][]int64
	for i, k := 0, 0; i < len(records) || len(deferred) > 0; k++ {
		for ; len(told) > 1; told = told[1:] {
			a.firstTokens(told[0])
		}
		n, startNs := 0, formedEnd // an empty step begins when the group is free
		if i < a.sent() {
			n, startNs = b.Take(a.queue[i:a.sent()], max(formedEnd, lastStart))
		} else if i < len(records) && len(deferred) == 0 && len(told) == 0 {
			break
		}
		lastStart = startNs
		in := StepInput{FreeNs: lastEnd, BatchStartNs: max(startNs, lastEnd), ChunkTokens: b.StepTokens}
		if startNs > lastEnd && len(deferred) == 0 {
			in.FreeNs = startNs
		}
		in.DeferredSinceNs = min(in.BatchStartNs, deferredSince)
		var waiting, own []int
		for _, j := range deferred {
			in.Deferred = append(in.Deferred, records[j].Hit)
		}
		for j := i; j < i+n; j++ {
			switch {
			case records[j].Flush:
			case records[j].Deferred:
				waiting = append(waiting, j)
			default:
				own = append(own, j)
				in.Batch = append(in.Batch, records[j].Hit)
			}
		}
		late, overrun := cost(k)
		if late > 0 {
			in.LoadsReadyNs = in.FreeNs + late
		}
		plan := PlanStep(p, l, in)
		var ends []int64
		time := func(j int, deferred bool, slot int, firstStartNs int64) {
			pass, ch := plan.Request(deferred, slot)
			measured[j] = Timing{
				ArrivalNs:      a.queue[j].ArrivalNs,
				FirstStartNs:   firstStartNs,
				StartNs:        pass.StartNs,
				ComputeStartNs: pass.ComputeStartNs,
				EndNs:          ch.FirstTokenNs + overrun,
				Chunks:         ch.Chunks,
			}
			ends = append(ends, measured[j].EndNs)
		}
		for s, j := range deferred {
			time(j, true, s, deferredSince)
		}
		for s, j := range own {
			time(j, false, s, plan.Batch.StartNs)
		}
		for j := i; j < i+n; j++ {
			if records[j].Flush || records[j].Deferred {
				measured[j] = Timing{ArrivalNs: a.queue[j].ArrivalNs, EndNs: plan.Batch.EndNs + overrun}
			}
		}
		told = append(told, ends)
		steps = append(steps, FormedStep{Records: n, TwoPasses: plan.TwoPasses})
		deferred, deferredSince = waiting, plan.Batch.StartNs
		formedEnd, lastEnd = lastEnd, plan.EndNs()+overrun
		i += n
	}
	return measured, steps
}

// randomRecords are n requests of random prompts and hits, some deferred for their prefetch, a few
// flushes, arriving in bursts and gaps around gapNs.
func randomRecords(r *rand.Rand, n int, gapNs int64) []Record {
	out := make([]Record, n)
	var at int64
	for i := range out {
		if r.IntN(4) > 0 {
			at += r.Int64N(2 * gapNs)
		}
		if r.IntN(30) == 0 {
			out[i] = Record{ArrivalNs: at, Flush: true}
			continue
		}
		prompt := 1 + r.Int64N(3000)
		l1 := r.Int64N(prompt) / 2
		l2 := r.Int64N(prompt - l1)
		h := Hit{PromptTokens: prompt, L1: l1, L2: l2}
		deferred := r.IntN(4) == 0
		if deferred {
			h.L3 = r.Int64N(prompt-l1-l2) + 1
		}
		out[i] = Record{ArrivalNs: at, Hit: h, Deferred: deferred}
	}
	return out
}

// TestReplayOfARunsStepsIsAFloorForEveryRequest: whatever a machinery costs (late load-backs,
// overruns, none), open or closed loop, chunked or not, the run's own steps replayed at no cost
// give every request a first token and a TTFT no later than the run's, and with a machinery that
// cost nothing exactly the run's, which is then also the virtual replay's. The virtual replay,
// which forms its own steps, is no such floor: after a costly step the run forms other steps, and
// some request beats it.
func TestReplayOfARunsStepsIsAFloorForEveryRequest(t *testing.T) {
	m := weightsPrefill{passSeconds: 0.02, newSeconds: 20e-6, cachedSeconds: 1e-6}
	var compared, beatVirtual int
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 46))
		b := Batching{StepTokens: []int64{0, 512, 4096}[r.IntN(3)], MaxRequests: 1 + r.IntN(8)}
		c := Clients{}
		if r.IntN(3) == 0 {
			c = Clients{N: 1 + r.IntN(6), ThinkNs: r.Int64N(20 * ms)}
		}
		records := randomRecords(r, 20+r.IntN(100), []int64{2, 20, 60}[r.IntN(3)]*ms)
		costly := func(int) (int64, int64) {
			if r.IntN(3) > 0 {
				return 0, 0
			}
			return r.Int64N(30 * ms), r.Int64N(40 * ms)
		}
		for _, free := range []bool{true, false} {
			cost := costly
			if free {
				cost = func(int) (int64, int64) { return 0, 0 }
			}
			measured, steps := costlyRun(records, b, m, deferralLinks, c, cost)
			// the run's arrivals are the records' (the clients sent them on the run's clock)
			ran := append([]Record(nil), records...)
			for i := range ran {
				ran[i].ArrivalNs = measured[i].ArrivalNs
			}
			ideal, err := ReplaySteps(ran, steps, b, m, deferralLinks)
			if err != nil {
				t.Fatalf("seed %d: %v", seed, err)
			}
			if i := FirstBelowIdeal(ran, measured, ideal.Requests); i >= 0 {
				t.Fatalf("seed %d, request %d: the run %+v, the replay of its steps %+v: want no later",
					seed, i, measured[i], ideal.Requests[i])
			}
			compared += len(ran)
			virtual := VirtualReplay(records, b, m, deferralLinks, c)
			if FirstBelowIdeal(ran, measured, virtual.Requests) >= 0 {
				beatVirtual++
			}
			if free && (!equalTimings(ran, measured, ideal.Requests) ||
				!equalTimings(ran, measured, virtual.Requests)) {
				t.Fatalf("seed %d: a machinery that costs nothing, yet the run differs from the replay of its steps or from the virtual replay", seed)
			}
		}
	}
	t.Logf("%d requests compared; the virtual replay beaten in %d runs", compared, beatVirtual)
	if beatVirtual == 0 {
		t.Errorf("no run beat the virtual replay: the test no longer shows why a run's ideal replays its own steps")
	}
}

// equalTimings says whether two clocks timed every request alike: its way to its first token, to
// the nanosecond (a flush's timing is no request's).
func equalTimings(records []Record, a, b []Timing) bool {
	for i := range records {
		if !records[i].Flush && a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestReplayStepsKeepsTheRunsShape: a step the run passed in two (the deferred requests at once,
// its own when they came) is replayed in two even when the replay's group is free after its own
// arrived; a step it passed in one stays one, its deferred requests waiting for its own. Steps
// that do not match the records are refused.
func TestReplayStepsKeepsTheRunsShape(t *testing.T) {
	m := perToken{newSeconds: 1e-3}
	b := Batching{StepTokens: 1000, MaxRequests: 8}
	records := []Record{
		{ArrivalNs: 0, Hit: Hit{PromptTokens: 100, L3: 96}, Deferred: true},
		{ArrivalNs: 1 * ms, Hit: Hit{PromptTokens: 10}},
	}
	two, err := ReplaySteps(records, []FormedStep{{Records: 1}, {Records: 1, TwoPasses: true}},
		b, m, deferralLinks)
	if err != nil {
		t.Fatal(err)
	}
	// Step 1 (empty of own requests) ends at 0; step 2 reads the rest of the deferred read (4 ms),
	// loads (1 ms) and computes it (4 ms) alone, then the second request (10 ms).
	if got := []int64{two.Requests[0].EndNs, two.Requests[1].EndNs}; got[0] != 9*ms ||
		got[1] != 19*ms || !two.TwoPasses[1] {
		t.Errorf("two passes: first tokens at %v ns (two passes %v), want [9 ms 19 ms]",
			got, two.TwoPasses)
	}
	one, err := ReplaySteps(records, []FormedStep{{Records: 1}, {Records: 1}}, b, m, deferralLinks)
	if err != nil {
		t.Fatal(err)
	}
	// One pass from 1 ms: the read's last 3 ms, the load, then 14 tokens computed.
	if got := one.Requests[1].EndNs; got != 19*ms || one.Requests[0].EndNs != 19*ms ||
		one.TwoPasses[1] {
		t.Errorf("one pass: first tokens at %d and %d ns, want both at 19 ms", one.Requests[0].EndNs, got)
	}
	for _, bad := range [][]FormedStep{
		{{Records: 3}},
		{{Records: 1}},
		{{Records: 1, TwoPasses: true}, {Records: 1}},
	} {
		if _, err := ReplaySteps(records, bad, b, m, deferralLinks); err == nil {
			t.Errorf("steps %+v over 2 records: no error", bad)
		}
	}
}
