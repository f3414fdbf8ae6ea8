package bound

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cphicache/cphicache/hicache/workload"
)

func request(tokens ...int32) workload.Event {
	return workload.Event{Request: workload.Request{InputIDs: tokens, OutputLen: 1}}
}

func boundOf(t *testing.T, events []workload.Event, capacity, pageTokens int) Result {
	t.Helper()
	res, err := HitTokens(events, Config{
		CapacityPages: capacity,
		Replay:        workload.IdealConfig{PageTokens: pageTokens, BatchRequests: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestBoundByHand: one-token pages, capacity 2. Prefixes A, AB, C: after AB the cache keeps A and
// B (both used next by the fourth request, AB again); the third request, C, cannot hit, and MIN
// does not keep it (its next use, the fifth request, is farther than A's and B's), so the fourth
// hits two pages and the fifth none; a page with no next use is never kept.
func TestBoundByHand(t *testing.T) {
	events := []workload.Event{
		request(1),       // A: miss
		request(1, 2),    // AB: A hits
		request(3),       // C: miss
		request(1, 2, 4), // ABD: A and B hit
		request(3),       // C: miss (MIN kept A and B over C)
	}
	if got := boundOf(t, events, 2, 1).HitTokens; got != 1+2 {
		t.Errorf("capacity 2: %d hit tokens, want 3", got)
	}
	if got := boundOf(t, events, 3, 1).HitTokens; got != 1+2+1 {
		t.Errorf("capacity 3: %d hit tokens, want 4 (C kept too)", got)
	}
	if got := boundOf(t, events, 0, 1).HitTokens; got != 0 {
		t.Errorf("capacity 0: %d hit tokens, want 0", got)
	}
	// Two-token pages: only whole pages count, a partial last page never.
	paged := []workload.Event{request(1, 2, 3), request(1, 2, 3, 4), request(1, 2, 5, 6)}
	if got := boundOf(t, paged, 1, 2).HitTokens; got != 2+2 {
		t.Errorf("two-token pages: %d hit tokens, want 4", got)
	}
}

// TestBoundByRequest: ByRequest splits the bound over the requests in the replay's order, flushes
// left out: by hand (TestBoundByHand's workload at capacity 2: the second request hits A, the
// fourth A and B), and on random workloads, where the split sums to HitTokens and no request hits
// more than the ideal's share of it (a page seen before since the last flush).
func TestBoundByRequest(t *testing.T) {
	events := []workload.Event{
		request(1), request(1, 2), request(3), {Flush: true}, request(3), request(3, 4),
	}
	cfg := Config{CapacityPages: 2, Replay: workload.IdealConfig{PageTokens: 1, BatchRequests: 1}}
	res, byRequest, err := ByRequest(events, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{0, 1, 0, 0, 1}; fmt.Sprint(byRequest) != fmt.Sprint(want) ||
		res.HitTokens != 2 || res.IdealTokens != 0 {
		t.Errorf("by request %v (total %d, ideal %d), want %v (total 2, no ideal computed)",
			byRequest, res.HitTokens, res.IdealTokens, want)
	}
	rng := rand.New(rand.NewPCG(49, 3))
	for range 500 {
		pageTokens := 1 + rng.IntN(2)
		events := smallWorkload(rng, pageTokens)
		cfg := Config{CapacityPages: rng.IntN(5),
			Replay: workload.IdealConfig{PageTokens: pageTokens, BatchRequests: 2}}
		total, err := HitTokens(events, cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, byRequest, err := ByRequest(events, cfg)
		if err != nil {
			t.Fatal(err)
		}
		ideal := workload.IdealHitsByRequest(events, cfg.Replay)
		var sum, before int64
		for i, hits := range byRequest {
			sum += hits
			if hits > ideal[i]-before {
				t.Fatalf("events %s: request %d hits %d, over the ideal's %d", describe(events), i,
					hits, ideal[i]-before)
			}
			before = ideal[i]
		}
		if sum != total.HitTokens || len(byRequest) != total.Requests {
			t.Fatalf("events %s: %d requests summing to %d, HitTokens %d over %d requests",
				describe(events), len(byRequest), sum, total.HitTokens, total.Requests)
		}
	}
}

// TestBoundMatchesBruteForce: on many small random workloads (few tokens, so prefixes are shared
// and diverge, and flushes), MIN's count equals the best of every schedule, found by brute force:
// after each request, every subset of the pages cached or just used that fits the capacity, prefix
// closed or not.
func TestBoundMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 1))
	cases, below := 0, 0
	for range 3000 {
		pageTokens := 1 + rng.IntN(2)
		events := smallWorkload(rng, pageTokens)
		for capacity := 0; capacity <= 4; capacity++ {
			got := boundOf(t, events, capacity, pageTokens)
			want := bruteForce(events, capacity, pageTokens)
			if got.HitTokens != want {
				t.Fatalf("%d-token pages, capacity %d, events %s: MIN %d, brute force %d",
					pageTokens, capacity, describe(events), got.HitTokens, want)
			}
			if got.HitTokens > got.IdealTokens {
				t.Fatalf("events %s: bound %d over the ideal %d", describe(events),
					got.HitTokens, got.IdealTokens)
			}
			cases++
			if got.HitTokens < got.IdealTokens {
				below++
			}
		}
	}
	// The cases must be ones where capacity binds, or they prove little.
	if below < cases/4 {
		t.Errorf("only %d of %d cases below the ideal", below, cases)
	}
}

// TestBoundUnboundedIsTheIdeal: with room for every page the bound is the ideal hit count,
// IdealHitTokens (another code path, the same definition), flushes and steps included.
func TestBoundUnboundedIsTheIdeal(t *testing.T) {
	rng := rand.New(rand.NewPCG(49, 2))
	for range 300 {
		events := smallWorkload(rng, 2)
		for range 20 {
			events = append(events, smallWorkload(rng, 2)...)
		}
		cfg := Config{
			CapacityPages: 1 << 30,
			Replay: workload.IdealConfig{
				PageTokens:      2,
				BatchRequests:   3,
				FlushEverySteps: int64(rng.IntN(4)),
			},
		}
		res, err := HitTokens(events, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res.HitTokens != res.IdealTokens {
			t.Fatalf("unbounded: %d hit tokens, the ideal %d", res.HitTokens, res.IdealTokens)
		}
	}
}

func TestBoundRefusesABadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{CapacityPages: -1, Replay: workload.IdealConfig{PageTokens: 1}},
		{CapacityPages: 1},
	} {
		if _, err := HitTokens(nil, cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// smallWorkload draws three to nine requests over a vocabulary of three tokens, now and then a flush.
func smallWorkload(rng *rand.Rand, pageTokens int) []workload.Event {
	var events []workload.Event
	for range 3 + rng.IntN(7) {
		if rng.IntN(10) == 0 {
			events = append(events, workload.Event{Flush: true})
			continue
		}
		tokens := make([]int32, pageTokens*(1+rng.IntN(3))+rng.IntN(pageTokens))
		for i := range tokens {
			tokens[i] = int32(1 + rng.IntN(2+i%2))
		}
		events = append(events, request(tokens...))
	}
	return events
}

func describe(events []workload.Event) string {
	out := ""
	for _, e := range events {
		if e.Flush {
			out += " flush"
			continue
		}
		out += fmt.Sprint(" ", e.Request.InputIDs)
	}
	return out
}

// bruteForce is the best hit tokens over every schedule: pages named by their token prefixes (a
// flush makes every page new), the cache a set of at most capacity of them, any subset of the
// pages cached or just used kept after each request.
func bruteForce(events []workload.Event, capacity, pageTokens int) int64 {
	var requests [][]int // page numbers of each request, root first
	names := map[string]int{}
	epoch := 0
	for _, e := range events {
		if e.Flush {
			epoch++
			requests = append(requests, nil) // a flush: the cache empties
			continue
		}
		var pages []int
		for end := pageTokens; end <= len(e.Request.InputIDs); end += pageTokens {
			name := fmt.Sprint(epoch, e.Request.InputIDs[:end])
			if _, ok := names[name]; !ok {
				names[name] = len(names)
			}
			pages = append(pages, names[name])
		}
		requests = append(requests, pages)
	}
	memo := map[[2]uint64]int64{}
	var best func(r int, cache uint64) int64
	best = func(r int, cache uint64) int64 {
		if r == len(requests) {
			return 0
		}
		if requests[r] == nil {
			return best(r+1, 0)
		}
		if v, ok := memo[[2]uint64{uint64(r), cache}]; ok {
			return v
		}
		hit, pool := int64(0), cache
		for _, p := range requests[r] {
			if pool&(1<<p) == 0 {
				break
			}
			hit++
		}
		for _, p := range requests[r] {
			pool |= 1 << p
		}
		top := int64(0)
		for keep := pool; ; keep = (keep - 1) & pool { // every subset of pool
			if popcount(keep) <= capacity {
				top = max(top, best(r+1, keep))
			}
			if keep == 0 {
				break
			}
		}
		v := hit*int64(pageTokens) + top
		memo[[2]uint64{uint64(r), cache}] = v
		return v
	}
	return best(0, 0)
}

func popcount(x uint64) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}
