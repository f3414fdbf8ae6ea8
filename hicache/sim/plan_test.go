package sim

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/hicache/workload"
)

// TestThePrefetchDecisionModelFails: a request must start a prefetch where the rule says (plan.go),
// of the MIN of its check's runs capped by the room, and none where it says none; skipping one, or
// starting one for a request below the threshold or while backed off, is a violation.
func TestThePrefetchDecisionModelFails(t *testing.T) {
	cfg := twoRankL3Config(64) // room for 64/8/2 = 4 blocks of unresolved prefetches
	cfg.L3.PrefetchThreshold = 8
	req := &workload.Request{
		InputIDs: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20},
	}
	j, err := newJob(cfg)
	if err != nil {
		t.Fatal(err)
	}
	j.blocks.learn([]workload.Event{{Request: *req}}, &j.cfg)
	g := j.groups[0]
	key := func(k int) uint64 { return l3block.ChainKey(0, req.InputIDs[4*k:4*k+4]) }
	// check 1 over blocks 0..4: every rank found all its own
	for cp, own := range [][]uint64{{key(0)}, {}} {
		w := &cache.ExistenceCheck{Seq: 1, Keys: own, FirstBlock: 0, Blocks: 5}
		g.checkStarted(w)
		g.ranks[cp].checkAnswered(w, len(own))
	}
	r := g.ranks[0]
	// the tree may serve up to token 16, and need not (served.go)
	for _, id := range pathIDs(req.InputIDs[:16], 2) {
		g.held.init()
		g.held.prefetched[id] = true
	}
	reserve := func(room int) { g.reservations = append(g.reservations[:0], reservation{pages: 8, room: room}) }
	plan := func(p cache.PrefetchPlan, want string) {
		t.Helper()
		j.violation = nil
		p.Request = req
		if r.planned(3, []cache.PrefetchPlan{p}); (j.violation == nil) != (want == "") ||
			want != "" && !strings.Contains(j.violation.What, want) {
			t.Errorf("%+v: violation %v, want %q", p, j.violation, want)
		}
	}
	plan(
		cache.PrefetchPlan{Usable: 0, Check: 1},
		"the model says 4 blocks",
	) // skipped, where the room allows 4
	reserve(64)
	plan(
		cache.PrefetchPlan{Usable: 0, Check: 1, Prefetch: 1, Blocks: 4},
		"",
	) // started as the rule says
	reserve(7)
	plan(
		cache.PrefetchPlan{Usable: 0, Check: 1, Missed: true},
		"",
	) // refused: 8 pages asked, 7 free or evictable
	reserve(8)
	plan(
		cache.PrefetchPlan{Usable: 0, Check: 1, Missed: true},
		"room for the model's 4 blocks of 2 pages",
	) // the L2 had room
	g.reservations = []reservation{{pages: 10, room: 9}}
	plan(
		cache.PrefetchPlan{Usable: 0, Check: 1, Missed: true},
		"room for the model's 4 blocks",
	) // refused at 5 blocks, room for 4
	g.reservations = nil
	plan(cache.PrefetchPlan{Usable: 0, Check: 1, Missed: true}, "no reservation was made")
	plan(
		cache.PrefetchPlan{Usable: 16, Check: 1},
		"is a candidate: the model says false, the core true",
	) // 4 tokens left, under 8
	plan(
		cache.PrefetchPlan{Usable: 8},
		"is a candidate: the model says true, the core false",
	) // 12 left: at or over the threshold
	g.backOff.resolved(
		true,
		2,
	) // an agreed failure at step 2: none until step 4
	plan(cache.PrefetchPlan{Usable: 0, Check: 1, Prefetch: 2, Blocks: 4}, "the model says 0 blocks")
	plan(cache.PrefetchPlan{Usable: 0, Check: 1}, "")
	plan(
		cache.PrefetchPlan{Usable: 0, Check: 1, Missed: true},
		"the model says 0 blocks",
	) // no reservation was due
}

// heldUpTo makes the served-prefix model hold req's pages before token end (served.go), as a step's
// planning would find them on the device.
func heldUpTo(g *group, req *workload.Request, end int) {
	g.held.init()
	pt := g.j.cfg.Geometry.PageTokens
	for _, id := range pathIDs(req.InputIDs[:end], pt) {
		g.held.now[id] = true
	}
}

// TestTheServedPrefixModelFails: every page of the prefix the tree served must be held when the
// decision began, on a device page or in a committed backup, or read by a prefetch, and the prefix
// must reach the first page not held (served.go); one page more or fewer, or a prefix that is not
// whole pages, is a violation.
func TestTheServedPrefixModelFails(t *testing.T) {
	j, err := newJob(twoRankL3Config(64))
	if err != nil {
		t.Fatal(err)
	}
	req := &workload.Request{InputIDs: []int32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}
	other := &workload.Request{InputIDs: []int32{0, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}}
	g := j.groups[0]
	heldUpTo(g, req, 4)
	heldUpTo(
		g,
		other,
		10,
	) // the same tokens from 2 on, on another path
	g.held.prefetched[pathIDs(req.InputIDs, 2)[2]] = true // tokens 4..5
	heldUpTo(g, &workload.Request{InputIDs: req.InputIDs[:8]}, 8)
	delete(g.held.now, pathIDs(req.InputIDs, 2)[2]) // 0..3 and 6..7 held, 4..5 prefetched
	for _, c := range []struct {
		usable int
		want   string
	}{
		{4, ""}, {6, ""}, {8, ""}, {10, "tokens 8..9 are held on no device page taken"},
		{2, "it holds its first 4"}, {0, "it holds its first 4"},
		{3, "not whole pages"}, {12, "not whole pages"},
	} {
		j.violation = nil
		if g.checkServed(
			g.ranks[0], 1, []cache.PrefetchPlan{{Request: req, Usable: c.usable}},
		); (j.violation == nil) != (c.want == "") ||
			c.want != "" && !strings.Contains(j.violation.What, c.want) {
			t.Errorf("served %d: violation %v, want %q", c.usable, j.violation, c.want)
		}
	}
}
