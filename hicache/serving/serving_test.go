package serving

import (
	"math"
	"reflect"
	"testing"
)

// perToken is a prefill model that charges a fixed time per computed token and per cached token
// attended to.
type perToken struct{ newSeconds, cachedSeconds float64 }

func (m perToken) BatchSeconds(batch []Tokens) float64 {
	var s float64
	for _, t := range batch {
		s += float64(t.New)*m.newSeconds + float64(t.Cached)*m.cachedSeconds
	}
	return s
}

const ms = int64(1e6)

func TestTakeFormsAStepFromWhatHasArrivedUpToTheBudget(t *testing.T) {
	b := Batching{StepTokens: 100, MaxRequests: 3}
	queue := []Queued{
		{ArrivalNs: 0, PromptTokens: 40},
		{ArrivalNs: 1 * ms, PromptTokens: 40},
		{ArrivalNs: 2 * ms, PromptTokens: 40},
		{ArrivalNs: 9 * ms, PromptTokens: 1},
	}
	for _, tc := range []struct {
		name      string
		queue     []Queued
		formNs    int64
		n         int
		startNs   int64
		batchings Batching
	}{
		{"empty", nil, 5 * ms, 0, 5 * ms, b},
		{"the budget stops the third", queue, 5 * ms, 2, 5 * ms, b},
		{"only what has arrived", queue, 1 * ms, 2, 1 * ms, b},
		{"nothing queued yet: the next arrival, alone if alone", queue[3:], 5 * ms, 1, 9 * ms, b},
		{"nothing queued yet: the first arrival and its equals", queue, -1, 1, 0, b},
		{"a request over the budget goes alone", []Queued{{PromptTokens: 500}, {PromptTokens: 1}}, 0, 1, 0, b},
		{"the request cap", queue, 5 * ms, 1, 5 * ms, Batching{StepTokens: 1000, MaxRequests: 1}},
		{"a flush goes alone", []Queued{{Flush: true}, {PromptTokens: 1}}, 3 * ms, 1, 3 * ms, b},
		{"a flush ends a step", []Queued{{PromptTokens: 1}, {Flush: true}}, 3 * ms, 1, 3 * ms, b},
	} {
		n, start := tc.batchings.Take(tc.queue, tc.formNs)
		if n != tc.n || start != tc.startNs {
			t.Errorf("%s: Take = (%d, %d), want (%d, %d)", tc.name, n, start, tc.n, tc.startNs)
		}
	}
}

func TestCostChargesLoadsBeforeThePrefillAndL3HitsTwice(t *testing.T) {
	l := Links{
		HostBytesPerSecond: 1000,
		L3BytesPerSecond:   500,
		KVBytesPerToken:    100,
		GPUs:               2,
		Nodes:              1,
	}
	m := perToken{newSeconds: 0.01, cachedSeconds: 0.001}
	got := Cost(m, l, []Hit{{PromptTokens: 100, L1: 10, L2: 20, L3: 30}})
	want := StepCost{
		L3ReadSeconds: 30 * 100 / 500.0, // the L3's tokens over one node's read rate
		// L2 and L3 hits, each GPU its half over its own link
		LoadSeconds: (20 + 30) * 100 / 2 / 1000.0,
		// the computed tokens, and the cached ones attended to
		PrefillSeconds: 40*0.01 + (10+20+30)*0.001,
	}
	if math.Abs(got.L3ReadSeconds-want.L3ReadSeconds) > 1e-12 ||
		math.Abs(got.LoadSeconds-want.LoadSeconds) > 1e-12 ||
		math.Abs(got.PrefillSeconds-want.PrefillSeconds) > 1e-12 {
		t.Fatalf("Cost = %+v, want %+v", got, want)
	}
	if got.Seconds() <= got.PrefillSeconds {
		t.Fatalf("a step with loads costs no more than its prefill: %+v", got)
	}
}

func TestVirtualReplayQueuesBehindTheStepThatRuns(t *testing.T) {
	m := perToken{newSeconds: 1e-3} // 1 ms a computed token
	b := Batching{StepTokens: 10, MaxRequests: 8}
	records := []Record{
		{ArrivalNs: 0, Hit: Hit{PromptTokens: 10}}, // step 1: [0, 10 ms)
		{
			ArrivalNs: 0,
			Hit:       Hit{PromptTokens: 10},
		}, // step 2, formed at 0: [10, 20 ms)
		{
			ArrivalNs: 15 * ms,
			Hit:       Hit{PromptTokens: 10},
		}, // formed at 10 ms, not yet arrived: starts at 20 ms
		{
			ArrivalNs: 100 * ms,
			Hit:       Hit{PromptTokens: 10},
		}, // an idle group: starts at its arrival
		{ArrivalNs: 100 * ms, Flush: true},                       // a flush costs no modelled time
		{ArrivalNs: 100 * ms, Hit: Hit{PromptTokens: 10, L1: 8}}, // 2 tokens computed
	}
	r := VirtualReplay(records, b, m, Links{}, Clients{})
	wantTTFT := []int64{10 * ms, 20 * ms, 15 * ms, 10 * ms, 0, 12 * ms}
	for i, w := range wantTTFT {
		if records[i].Flush {
			continue
		}
		if got := r.Requests[i].TTFTNs(); got != w {
			t.Errorf("request %d: TTFT %d ns, want %d", i, got, w)
		}
	}
	if r.Steps != 6 {
		t.Errorf("%d steps, want 6", r.Steps)
	}
	s := Summarize(records, r.Requests)
	if s.Requests != 5 || s.TTFTP50 != 0.012 || s.TTFTP99 != 0.020 {
		t.Errorf("Summarize = %+v, want 5 requests, p50 12 ms, p99 20 ms", s)
	}
}

// A cache that supplies more of every prompt never makes a request's first token later on the
// virtual clock, whatever the arrivals: the prefill model and the links charge a cached token less
// than a computed one.
func TestMoreHitsNeverLateOnTheVirtualClock(t *testing.T) {
	m := perToken{newSeconds: 1e-4, cachedSeconds: 1e-6}
	l := Links{
		HostBytesPerSecond: 1e9,
		L3BytesPerSecond:   1e8,
		KVBytesPerToken:    1000,
		GPUs:               8,
		Nodes:              1,
	}
	b := Batching{StepTokens: 4096, MaxRequests: 16}
	state := uint64(7)
	next := func(n int64) int64 {
		state = state*6364136223846793005 + 1442695040888963407
		return int64(state>>33) % n
	}
	for trial := 0; trial < 50; trial++ {
		var cold, warm []Record
		var at int64
		for i := 0; i < 40; i++ {
			at += next(20) * ms
			prompt := 1 + next(6000)
			cached := next(prompt + 1)
			cold = append(cold, Record{ArrivalNs: at, Hit: Hit{PromptTokens: prompt}})
			warm = append(warm, Record{ArrivalNs: at, Hit: Hit{PromptTokens: prompt, L2: cached}})
		}
		c, w := VirtualReplay(cold, b, m, l, Clients{}), VirtualReplay(warm, b, m, l, Clients{})
		for i := range cold {
			if w.Requests[i].EndNs > c.Requests[i].EndNs {
				t.Fatalf(
					"trial %d: request %d's first token at %d ns with hits, %d without",
					trial,
					i,
					w.Requests[i].EndNs,
					c.Requests[i].EndNs,
				)
			}
		}
	}
}

func TestPoissonArrivalsHaveTheirRateAndReplay(t *testing.T) {
	const n, rate = 20000, 50.0
	a, b := PoissonArrivalsNs(n, rate, 9), PoissonArrivalsNs(n, rate, 9)
	for i := range a {
		if a[i] != b[i] || (i > 0 && a[i] < a[i-1]) {
			t.Fatalf("arrival %d: %d then %d, or not replayed (%d)", i, a[i-1], a[i], b[i])
		}
	}
	// n-1 exponential gaps of mean 1/rate: their mean is within 3% of it (about 4 standard errors).
	if got := float64(a[n-1]) / 1e9 / (n - 1); math.Abs(got*rate-1) > 0.03 {
		t.Fatalf("mean gap %.5f s, want %.5f s", got, 1/rate)
	}
	if c := PoissonArrivalsNs(n, rate, 10); c[n-1] == a[n-1] {
		t.Fatalf("another seed gives the same arrivals")
	}
}

// deferralLinks read an L3 hit of 96 tokens in 4 ms and load it back in 1 ms.
var deferralLinks = Links{
	L3BytesPerSecond:   24e6,
	HostBytesPerSecond: 96e6,
	KVBytesPerToken:    1000,
	GPUs:               1,
	Nodes:              1,
}

// TestDeferredRequestIsServedTheStepAfterItsOwn: a request whose prefix is in the L3 waits for its
// step's consensus to agree its prefetch, so it is served in the next step, as the core serves it:
// its read overlaps its own step's compute of the others, and only what is left of it delays its
// pass. The ideal keeps that rule, so that measured over ideal counts the machinery alone.
func TestDeferredRequestIsServedTheStepAfterItsOwn(t *testing.T) {
	m := perToken{newSeconds: 1e-3}
	b := Batching{StepTokens: 1000, MaxRequests: 8}
	lone := Record{ArrivalNs: 0, Hit: Hit{PromptTokens: 100, L3: 96}, Deferred: true}
	for _, tc := range []struct {
		name    string
		records []Record
		ttft    []int64
	}{
		// Step 1 computes the other request (10 ms) while the L3 read (4 ms) runs; step 2 loads (1
		// ms) and computes (4 ms) the deferred one. Served in its own step both would end at 4 + 1
		// + 14 ms.
		{"its read under the step before", []Record{lone, {ArrivalNs: 0, Hit: Hit{PromptTokens: 10}}}, []int64{15 * ms, 10 * ms}},
		// Nothing else to compute: the read, the load, the compute, in a step of their own.
		{"alone", []Record{lone}, []int64{9 * ms}},
		// The next request arrives a second later: the deferred one does not wait for it.
		{"not held for the next arrival", []Record{lone, {ArrivalNs: 1000 * ms, Hit: Hit{PromptTokens: 10}}}, []int64{9 * ms, 10 * ms}},
		// The next request has arrived when the group is free (10 ms): one pass serves both (load
		// 1, 14 computed).
		{"joined by the next step's own", []Record{
			lone,
			{ArrivalNs: 0, Hit: Hit{PromptTokens: 10}},
			{ArrivalNs: 1 * ms, Hit: Hit{PromptTokens: 10}},
		},
			[]int64{25 * ms, 10 * ms, 24 * ms}},
		// It arrives while the deferred pass runs: it waits for that pass (9 ms), then computes (10
		// ms).
		{"the next arrival waits for the deferred pass", []Record{lone, {ArrivalNs: 1 * ms, Hit: Hit{PromptTokens: 10}}}, []int64{9 * ms, 18 * ms}},
	} {
		r := VirtualReplay(tc.records, b, m, deferralLinks, Clients{})
		for i, want := range tc.ttft {
			if got := r.Requests[i].TTFTNs(); got != want {
				t.Errorf(
					"%s: request %d's TTFT %.3f ms, want %.3f ms",
					tc.name,
					i,
					float64(got)/1e6,
					float64(want)/1e6,
				)
			}
		}
	}
}

// TestPlanStepPricesEachPassInAGPUsOrder: a step with deferred requests and its own arriving later
// has two passes, the deferred one's at once, counting its read from when it began; the step's own
// waits for its arrival and for the deferred pass; a real load-back that finished late delays the
// compute.
func TestPlanStepPricesEachPassInAGPUsOrder(t *testing.T) {
	m := perToken{newSeconds: 1e-3}
	in := StepInput{FreeNs: 2 * ms, BatchStartNs: 5 * ms, DeferredSinceNs: 0,
		Deferred: []Hit{{PromptTokens: 100, L3: 96}}, Batch: []Hit{{PromptTokens: 3}}}
	p := PlanStep(m, deferralLinks, in)
	want := StepPlan{
		Deferred: Pass{StartNs: 2 * ms, ComputeStartNs: 5 * ms, EndNs: 9 * ms,
			Forwards: 1, Requests: []Chunks{{Chunks: 1, FirstTokenNs: 9 * ms}}},
		Batch: Pass{StartNs: 9 * ms, ComputeStartNs: 9 * ms, EndNs: 12 * ms,
			Forwards: 1, Requests: []Chunks{{Chunks: 1, FirstTokenNs: 12 * ms}}},
		TwoPasses: true,
	}
	if !reflect.DeepEqual(p, want) || p.IdleNs() != 0 || p.EndNs() != 12*ms {
		t.Fatalf("PlanStep = %+v, want %+v", p, want)
	}
	// the step's own had arrived; a load-back ended at 7 ms
	in.BatchStartNs, in.LoadsReadyNs = 2*ms, 7*ms
	p = PlanStep(m, deferralLinks, in)
	want = StepPlan{
		Deferred: Pass{StartNs: 2 * ms, ComputeStartNs: 2 * ms, EndNs: 2 * ms},
		Batch: Pass{StartNs: 2 * ms, ComputeStartNs: 7 * ms, EndNs: 14 * ms, Forwards: 1,
			Requests: []Chunks{{Chunks: 1, FirstTokenNs: 14 * ms}, {Chunks: 1, FirstTokenNs: 14 * ms}}},
		deferredInBatch: 1,
	}
	if !reflect.DeepEqual(p, want) {
		t.Fatalf("PlanStep = %+v, want %+v", p, want)
	}
	if _, c := p.Request(false, 0); c.FirstTokenNs != 14*ms {
		t.Fatalf("the step's own request: %+v, want its first token at 14 ms", c)
	}
}

// TestClosedLoopSendsWhenAFirstTokenComes: N clients send the first N requests at 0, and each next
// one when a first token frees a client, ThinkNs later, the earliest first token first; a flush
// holds no client.
func TestClosedLoopSendsWhenAFirstTokenComes(t *testing.T) {
	flush := []bool{false, false, true, false, false, false}
	l := NewClosedLoop(Clients{N: 2, ThinkNs: 5 * ms}, flush)
	if l.Sent() != 3 || l.ArrivalNs(1) != 0 || l.ArrivalNs(2) != 0 {
		t.Fatalf("at the start %d sent, want the two requests and the flush after them", l.Sent())
	}
	l.FirstTokens([]int64{30 * ms, 10 * ms})
	if l.Sent() != 5 || l.ArrivalNs(3) != 15*ms || l.ArrivalNs(4) != 35*ms {
		t.Fatalf("after first tokens at 30 and 10 ms: %d sent, arrivals %v", l.Sent(), l.arrivals)
	}
	l.FirstTokens(nil)
	if l.Sent() != 5 {
		t.Fatalf("no first token sent a request: %d sent", l.Sent())
	}
	l.FirstTokens([]int64{40 * ms, 50 * ms}) // one request left for two free clients
	if l.Sent() != 6 || l.ArrivalNs(5) != 45*ms {
		t.Fatalf("the last request: %d sent, arrivals %v", l.Sent(), l.arrivals)
	}
}

// TestVirtualReplayWithAClient: one client, no think time, 10 ms a request. A step is formed as the
// one before it begins, so a first token reaches the client in time for the step after next:
// between two requests the group runs an empty step, which on the virtual clock costs nothing. Each
// request arrives at the last one's first token and waits for nothing.
func TestVirtualReplayWithAClient(t *testing.T) {
	m := perToken{newSeconds: 1e-3}
	b := Batching{StepTokens: 100, MaxRequests: 8}
	records := []Record{
		{Hit: Hit{PromptTokens: 10}},
		{ArrivalNs: 999 * ms, Hit: Hit{PromptTokens: 10}},
		{Hit: Hit{PromptTokens: 10}},
	}
	r := VirtualReplay(records, b, m, Links{}, Clients{N: 1})
	for i, tm := range r.Requests {
		if tm.ArrivalNs != int64(i)*10*ms || tm.TTFTNs() != 10*ms {
			t.Errorf(
				"request %d arrived at %d ns with a TTFT of %d ns, want %d ns and 10 ms",
				i,
				tm.ArrivalNs,
				tm.TTFTNs(),
				int64(i)*10*ms,
			)
		}
	}
	if r.Steps != 5 {
		t.Errorf("%d steps, want 5 (3 requests, an empty step between each two)", r.Steps)
	}
	// Two clients keep the group busy: the second request is formed with the first, and they share
	// its step.
	r = VirtualReplay(records, b, m, Links{}, Clients{N: 2, ThinkNs: 1 * ms})
	if got := r.Requests[1].TTFTNs(); got != 20*ms {
		t.Errorf("the second of two clients' first requests: TTFT %d ns, want 20 ms", got)
	}
	if got := r.Requests[2].ArrivalNs; got != 21*ms {
		t.Errorf(
			"the third request arrived at %d ns, want 21 ms (the first token at 20 ms, 1 ms of thought)",
			got,
		)
	}
}

// TestFasterL3NeverLateOnTheVirtualClock: the same hits, deferred alike, read from a faster L3
// never make a request's first token later, whatever the arrivals (the sweep's modelled L3 at two
// read rates).
func TestFasterL3NeverLateOnTheVirtualClock(t *testing.T) {
	m := perToken{newSeconds: 1e-4, cachedSeconds: 1e-6}
	b := Batching{StepTokens: 4096, MaxRequests: 16}
	state := uint64(11)
	next := func(n int64) int64 {
		state = state*6364136223846793005 + 1442695040888963407
		return int64(state>>33) % n
	}
	for trial := 0; trial < 50; trial++ {
		var records []Record
		var at int64
		for i := 0; i < 40; i++ {
			at += next(20) * ms
			prompt := 1 + next(6000)
			l3 := next(prompt)
			records = append(
				records,
				Record{ArrivalNs: at, Hit: Hit{PromptTokens: prompt, L3: l3}, Deferred: l3 > 0},
			)
		}
		slowLinks := Links{
			HostBytesPerSecond: 1e9,
			L3BytesPerSecond:   1e7,
			KVBytesPerToken:    1000,
			GPUs:               8,
			Nodes:              1,
		}
		fastLinks := slowLinks
		fastLinks.L3BytesPerSecond = 1e9
		slow, fast := VirtualReplay(
			records,
			b,
			m,
			slowLinks,
			Clients{},
		), VirtualReplay(
			records,
			b,
			m,
			fastLinks,
			Clients{},
		)
		for i := range records {
			if fast.Requests[i].EndNs > slow.Requests[i].EndNs {
				t.Fatalf(
					"trial %d: request %d's first token at %d ns from the fast L3, %d from the slow",
					trial,
					i,
					fast.Requests[i].EndNs,
					slow.Requests[i].EndNs,
				)
			}
		}
	}
}
