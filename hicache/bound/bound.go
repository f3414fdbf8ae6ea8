// Package bound computes the offline bound on a replay's cache hits: the most prompt tokens any
// policy could serve from a cache of a given number of pages over the same events, Belady's MIN
// adapted to the prefix tree. It is OFFLINE: it reads every request's future, which no cache can;
// every number it gives is labelled so wherever it is printed (docs/POLICIES.md).
//
// # The problem it solves exactly
//
// A page is a node of the prompts' prefix tree at page granularity: a request's i-th whole page
// is the same page as another request's when both requests' first i+1 pages are equal. A request
// hits the longest prefix of its pages that the cache holds before it is served; afterwards the
// cache may keep any of the request's pages (they were just computed or loaded) and drop any page,
// holding at most Capacity pages between requests. The bound is the most hit pages over every such
// schedule, times the page's tokens.
//
// # How MIN is adapted, and why it is exact
//
// A page's next use is the next request whose prompt passes through it. A request that passes
// through a page passes through each of its ancestors, so an ancestor's next use is never later
// than its descendant's. After each request, of the pages cached or just used, the cache keeps
// the Capacity pages of the nearest next use (ties: the shallower first, then the lower page
// number) and drops every page never used again: Belady's MIN with bypass, at request
// granularity. Because next uses only grow down the tree and ties keep the shallower page, the
// kept set is always prefix-closed: a page is kept only while its prefix is, the only way a page
// is worth keeping.
//
// Each hit is a page kept over the interval from one of its uses to the next, one slot of the
// capacity over every gap between requests inside it. Keeping the most such intervals under the
// capacity is the maximum C-colourable subgraph of an interval graph, which keeping the nearest
// ends first solves exactly for unit intervals (Carlisle and Lloyd, "On the k-coloring of
// intervals", Discrete Applied Mathematics 59(3), 1995; Belady, "A study of replacement algorithms
// for a virtual-storage computer", IBM Systems Journal 5(2), 1966). The prefix rule adds no
// constraint to that optimum: a page's interval ending at a request contains each ancestor's
// interval ending there (the ancestor was used at least as recently), so a selection that keeps a
// page without an ancestor can trade it for the ancestor's interval, at no more capacity and the
// same count, until it is prefix-closed. MIN's count is therefore the true maximum of the problem
// above (tested against brute force on small cases, bound_test.go).
//
// # Why it bounds a run
//
// Every hit of run is a page that L1 or the L2 held, whole, from its last use (its computation, a
// load-back, or an earlier hit) until the request, and L1 and the L2 hold at most L1 pages + L2
// slots distinct pages at any time. So run's L1 + L2 hit tokens, under any L1 order, any
// --l2-policy and any write policy, are at most the bound at Capacity = --device-pages +
// --l2-slots, over the replica's events cut as the replay cuts them (flushes empty it). What run
// has and the bound does not (objects evicted whole, L1's own LRU, pages pinned by copies,
// backups that land at the step's end, requests longer than L1) only lowers run's hits. The bound
// does not cover an L3, which outlives flushes and holds more than the capacity: with --l3-dir,
// run's hits may pass it. At Capacity = --l2-slots alone it is the best an L2 alone could do,
// which is not a bound on run's L1 + L2 hits.
package bound

import (
	"container/heap"
	"fmt"
	"math"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// Config is what the bound is computed for.
type Config struct {
	// CapacityPages is how many pages the cache holds between requests: --device-pages +
	// --l2-slots bounds run's L1 + L2 hits (see the package doc).
	CapacityPages int
	// Replay cuts the replica's events as the replay does: page tokens, vocabulary (to expand
	// compact requests), the steps and the flushes.
	Replay workload.IdealConfig
}

// Result is the bound over one replica's events.
type Result struct {
	// HitTokens is the OFFLINE bound: the most prompt tokens any policy could serve from a cache
	// of CapacityPages pages (whole pages only).
	HitTokens    int64
	IdealTokens  int64 // an unbounded cache's hit tokens (workload.IdealHitTokens)
	PromptTokens int64
	Requests     int
	Pages        int // distinct pages of the prefix tree, summed over the flushes' epochs
}

// HitTokens computes the bound over one replica's events; a DP job's bound is the sum over its
// replicas. It costs O(R log R) time and O(R) memory for R whole pages of prompts.
func HitTokens(events []workload.Event, cfg Config) (Result, error) {
	if err := check(cfg); err != nil {
		return Result{}, err
	}
	res, _ := run(events, cfg, false)
	res.IdealTokens = workload.IdealHitTokens(events, cfg.Replay)
	return res, nil
}

// ByRequest is HitTokens without the ideal, and with each request's share of the bound: the hit
// tokens of every request in the order the replay serves them (workload.EachRequest's, flushes
// left out) under the one schedule MIN chose, which sum to HitTokens. The schedule maximises the
// sum, not any one request's hits, so a request may hit less here than under some policy: a
// virtual replay of these hits times the bound's hits, and bounds no policy's TTFT.
func ByRequest(events []workload.Event, cfg Config) (Result, []int64, error) {
	if err := check(cfg); err != nil {
		return Result{}, nil, err
	}
	res, byRequest := run(events, cfg, true)
	return res, byRequest, nil
}

func check(cfg Config) error {
	if cfg.CapacityPages < 0 || cfg.Replay.PageTokens <= 0 {
		return fmt.Errorf(
			"bound: capacity %d pages and %d-token pages: want a capacity >= 0 and pages > 0",
			cfg.CapacityPages,
			cfg.Replay.PageTokens,
		)
	}
	return nil
}

// run reads the events' pages and replays MIN over them, counting each request's hit tokens when
// byRequest is asked for.
func run(events []workload.Event, cfg Config, byRequest bool) (Result, []int64) {
	t := trace{}
	t.read(events, cfg.Replay)
	t.nextUses()
	var perRequest []int64
	if byRequest {
		perRequest = make([]int64, len(t.starts)-1)
	}
	hits := t.belady(cfg.CapacityPages, perRequest)
	for i := range perRequest {
		perRequest[i] *= int64(cfg.Replay.PageTokens)
	}
	return Result{
		HitTokens:    hits * int64(cfg.Replay.PageTokens),
		PromptTokens: t.promptTokens,
		Requests:     len(t.starts) - 1,
		Pages:        t.pages,
	}, perRequest
}

// never is the next use of a page no later request passes through.
const never = math.MaxInt32

// trace is the replica's requests as pages: refs holds every request's pages root first, request
// r's at refs[starts[r]:starts[r+1]]; next[i] is the next request that uses refs[i]'s page.
type trace struct {
	refs, next   []int32
	starts       []int32
	pages        int
	promptTokens int64
}

// read numbers the pages of every request in replay order. A page is the hash chained over every
// token of its path (a 64-bit hash: two paths collide with odds about n^2/2^65 over n pages, which
// could only merge two pages); a flush starts new numbers, as the replay's cache starts empty.
func (t *trace) read(events []workload.Event, replay workload.IdealConfig) {
	ids := map[uint64]int32{}
	pt := replay.PageTokens
	t.starts = append(t.starts, 0)
	workload.EachRequest(events, replay, func(tokens []int32) {
		t.promptTokens += int64(len(tokens))
		h := uint64(0x626f756e64) // "bound"
		for start := 0; start+pt <= len(tokens); start += pt {
			for _, token := range tokens[start : start+pt] {
				h = pool.Mix64(h ^ uint64(uint32(token)))
			}
			id, ok := ids[h]
			if !ok {
				id = int32(t.pages)
				ids[h] = id
				t.pages++
			}
			t.refs = append(t.refs, id)
		}
		t.starts = append(t.starts, int32(len(t.refs)))
	}, func() { clear(ids) })
}

// nextUses fills next by one pass from the last request back.
func (t *trace) nextUses() {
	last := make([]int32, t.pages)
	for i := range last {
		last[i] = never
	}
	t.next = make([]int32, len(t.refs))
	for r := len(t.starts) - 2; r >= 0; r-- {
		for i := t.starts[r]; i < t.starts[r+1]; i++ {
			t.next[i], last[t.refs[i]] = last[t.refs[i]], int32(r)
		}
	}
}

// belady replays the requests under MIN with bypass and returns the hit pages: before each
// request, the longest prefix of its pages the cache holds; after it, every page of the request
// with a next use joins the cache under its new next use, every one without leaves it, and the
// pages of the farthest next use (the deeper first) leave until capacity pages remain. When
// byRequest is not nil it receives each request's hit pages.
func (t *trace) belady(capacity int, byRequest []int64) int64 {
	cached := make([]bool, t.pages)
	key := make([]int32, t.pages) // a cached page's next use, as its live heap entry holds it
	var h farthest
	var hits int64
	count := 0
	for r := 0; r+1 < len(t.starts); r++ {
		refs := t.refs[t.starts[r]:t.starts[r+1]]
		hit := 0
		for hit < len(refs) && cached[refs[hit]] {
			hit++
		}
		hits += int64(hit)
		if byRequest != nil {
			byRequest[r] = int64(hit)
		}
		for depth, page := range refs {
			next := t.next[int(t.starts[r])+depth]
			switch {
			case next == never && cached[page]:
				cached[page] = false
				count--
			case next != never:
				if !cached[page] {
					cached[page] = true
					count++
				}
				key[page] = next
				heap.Push(&h, entry{next: next, depth: int32(depth), page: page})
			}
		}
		for count > capacity {
			e := heap.Pop(&h).(entry)
			if cached[e.page] && key[e.page] == e.next { // else a stale entry
				cached[e.page] = false
				count--
			}
		}
		h.compact(cached, key, count)
	}
	return hits
}

// entry is a cached page under its next use.
type entry struct {
	next, depth, page int32
}

// farthest is a max-heap of entries: the farthest next use first, then the deeper page, then the
// higher page number, a total order so that the bound is one number. Entries go stale when their
// page is used again or leaves; compact drops them when they outnumber the live ones.
type farthest []entry

func (h farthest) Len() int { return len(h) }
func (h farthest) Less(i, j int) bool {
	a, b := h[i], h[j]
	if a.next != b.next {
		return a.next > b.next
	}
	if a.depth != b.depth {
		return a.depth > b.depth
	}
	return a.page > b.page
}
func (h farthest) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *farthest) Push(x any)   { *h = append(*h, x.(entry)) }
func (h *farthest) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// compact rebuilds the heap from its live entries once it holds over twice as many as there are
// pages cached, so that it stays O(pages cached + one request's pages) long.
func (h *farthest) compact(cached []bool, key []int32, count int) {
	if len(*h) <= 2*count+64 {
		return
	}
	live := (*h)[:0]
	for _, e := range *h {
		if cached[e.page] && key[e.page] == e.next {
			live = append(live, e)
		}
	}
	*h = live
	heap.Init(h)
}
