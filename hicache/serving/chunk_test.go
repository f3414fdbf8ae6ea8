package serving

import (
	"math"
	"reflect"
	"testing"

	"github.com/cphicache/cphicache/hicache/prefill"
)

// TestChunkPacksForwardPassesByTheBudget: requests in order, a forward pass at most the budget's new
// tokens, a request that does not fit what is left cut there and continued first in the next
// forward pass, each chunk attending over its prefix and its earlier chunks.
func TestChunkPacksForwardPassesByTheBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		reqs   []Tokens
		budget int64
		want   Forwards
	}{
		{"no budget: one forward pass", []Tokens{{New: 20000, Cached: 5}, {New: 3}}, 0, Forwards{
			Passes: [][]Tokens{{{New: 20000, Cached: 5}, {New: 3}}},
			Last:   []int{0, 0}, Chunks: []int{1, 1},
		}},
		{"within the budget: one forward pass of the requests as they are",
			[]Tokens{{New: 4000, Cached: 100}, {New: 4192}}, 8192, Forwards{
				Passes: [][]Tokens{{{New: 4000, Cached: 100}, {New: 4192}}},
				Last:   []int{0, 0}, Chunks: []int{1, 1},
			}},
		{"a long prompt: chunks after its prefix and its earlier chunks",
			[]Tokens{{New: 20000, Cached: 1000}}, 8192, Forwards{
				Passes: [][]Tokens{
					{{New: 8192, Cached: 1000}},
					{{New: 8192, Cached: 9192}},
					{{New: 3616, Cached: 17384}},
				},
				Last: []int{2}, Chunks: []int{3},
			}},
		{"a short request first, the long one fills its forward pass, the next fills the long one's last",
			[]Tokens{{New: 3000}, {New: 20000}, {New: 100, Cached: 7}}, 8192, Forwards{
				Passes: [][]Tokens{
					{{New: 3000}, {New: 5192}},
					{{New: 8192, Cached: 5192}},
					{{New: 6616, Cached: 13384}, {New: 100, Cached: 7}},
				},
				Last: []int{0, 2, 2}, Chunks: []int{1, 3, 1},
			}},
		{"a request that fills the budget exactly leaves nothing to the next",
			[]Tokens{{New: 8192}, {New: 0, Cached: 9}, {New: 1}}, 8192, Forwards{
				Passes: [][]Tokens{{{New: 8192}, {New: 0, Cached: 9}}, {{New: 1}}},
				Last:   []int{0, 0, 1}, Chunks: []int{1, 1, 1},
			}},
		{"nothing", nil, 8192, Forwards{Last: []int{}, Chunks: []int{}}},
	} {
		if got := Chunk(tc.reqs, tc.budget); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Chunk = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// TestChunkKeepsEveryTokenUnderTheBudget: over random requests and budgets, no forward pass
// computes more than the budget, every request's new tokens are computed once, in order, each
// chunk attending over its prefix and the chunks before it, and a request's chunks are the forward
// passes from its first to its Last.
func TestChunkKeepsEveryTokenUnderTheBudget(t *testing.T) {
	state := uint64(3)
	next := func(n int64) int64 {
		state = state*6364136223846793005 + 1442695040888963407
		return int64(state>>33) % n
	}
	for trial := 0; trial < 500; trial++ {
		budget := 1 + next(5000)
		reqs := make([]Tokens, next(8))
		for i := range reqs {
			reqs[i] = Tokens{New: 1 + next(12000), Cached: next(30000)} // Hit.Tokens computes 1 at least
		}
		f := Chunk(reqs, budget)
		done := make([]int64, len(reqs)) // by request, its new tokens computed so far
		first := make([]int, len(reqs))  // by request, the forward pass of its first chunk
		i := 0                           // the request the next chunk belongs to
		for k, pass := range f.Passes {
			var n int64
			for _, c := range pass {
				if done[i] == reqs[i].New {
					i++
				}
				if done[i] == 0 {
					first[i] = k
				}
				if c.New < 1 || c.Cached != reqs[i].Cached+done[i] {
					t.Fatalf("trial %d, pass %d: chunk %+v of request %d, want it to attend over %d",
						trial, k, c, i, reqs[i].Cached+done[i])
				}
				done[i] += c.New
				n += c.New
			}
			if n > budget {
				t.Fatalf("trial %d: forward pass %d computes %d new tokens, over %d", trial, k, n, budget)
			}
		}
		for i, r := range reqs {
			least := (r.New + budget - 1) / budget
			if done[i] != r.New || f.Last[i]-first[i]+1 != f.Chunks[i] ||
				int64(f.Chunks[i]) < least || int64(f.Chunks[i]) > least+1 {
				t.Fatalf("trial %d: request %d computed %d of %d new tokens in %d chunks, passes %d to %d (budget %d)",
					trial, i, done[i], r.New, f.Chunks[i], first[i], f.Last[i], budget)
			}
		}
	}
}

// TestChunkedLongPromptTakesLongerThanItsFirstChunk: a cold 64K-token prompt alone, chunked by an
// 8192-token budget, runs its 8 chunks back to back, each attending over the ones before it: its
// first token comes at its last chunk's end, which is each chunk's own price added up, longer than
// its first chunk alone, and no shorter than the prompt in one forward pass.
func TestChunkedLongPromptTakesLongerThanItsFirstChunk(t *testing.T) {
	const prompt, budget = 65536, 8192
	b := Batching{StepTokens: budget, MaxRequests: 8}
	for _, model := range []string{"llama-3.1-70b", "deepseek-v3"} {
		m := newRoofline(t, model)
		r := VirtualReplay([]Record{{Hit: Hit{PromptTokens: prompt}}}, b, m, Links{}, Clients{})
		first := VirtualReplay([]Record{{Hit: Hit{PromptTokens: budget}}}, b, m, Links{}, Clients{})
		var chunks int64
		for k := int64(0); k < prompt/budget; k++ {
			chunks += Nanoseconds(m.BatchSeconds([]Tokens{{New: budget, Cached: k * budget}}))
		}
		whole := Nanoseconds(Cost(m, Links{}, []Hit{{PromptTokens: prompt}}).PrefillSeconds)
		got := r.Requests[0]
		t.Logf("%s: 64K prompt in 8 chunks %.3f s, its first chunk alone %.3f s, in one pass %.3f s (MODELLED)",
			model, float64(got.TTFTNs())/1e9, float64(first.Requests[0].TTFTNs())/1e9, float64(whole)/1e9)
		if got.TTFTNs() != chunks || got.Chunks != prompt/budget {
			t.Errorf("%s: TTFT %d ns in %d chunks, want its chunks' own prices added up, %d ns, in %d",
				model, got.TTFTNs(), got.Chunks, chunks, prompt/budget)
		}
		if !(got.TTFTNs() > first.Requests[0].TTFTNs()) || got.TTFTNs() < whole {
			t.Errorf("%s: TTFT %d ns, its first chunk alone %d ns, in one pass %d ns: want longer than the first, no shorter than one pass",
				model, got.TTFTNs(), first.Requests[0].TTFTNs(), whole)
		}
	}
}

// TestChunksAttendOverTheEarlierChunks: the chunks of a 32K-token prompt after a 4K-token prefix
// attend over the prefix and the chunks before them, so their attention pairs add up to the
// prompt's in one pass (a GQA model's attention FLOPs are equal), an MLA model under expansion
// expands its prefix and earlier chunks again in every chunk, and every chunk reads the weights
// again.
func TestChunksAttendOverTheEarlierChunks(t *testing.T) {
	const cached, fresh, budget = 4096, 32768, 8192
	f := Chunk([]Tokens{{New: fresh, Cached: cached}}, budget)
	if len(f.Passes) != fresh/budget {
		t.Fatalf("%d forward passes, want %d", len(f.Passes), fresh/budget)
	}
	for _, model := range []string{"llama-3.1-70b", "deepseek-v3"} {
		r := newRoofline(t, model).r
		mem := func(reqs ...prefill.Request) float64 { return r.MemorySeconds(reqs) }
		// The memory term is the weights once a forward pass and each request's KV once: linear.
		kv := mem(prefill.Request{NewTokens: 2}) - mem(prefill.Request{NewTokens: 1})
		weights := mem(prefill.Request{NewTokens: 1}) - kv
		// The linear FLOPs are a constant a pass (the output head, on a request's last token) and a
		// rate a new token.
		head := 2*prefill.LinearFLOPs(r.Model, 1) - prefill.LinearFLOPs(r.Model, 2)
		whole := prefill.Request{NewTokens: fresh, CachedTokens: cached}
		var attention, flops, memory, reexpanded, kvRead float64
		for _, pass := range f.Passes {
			c := pass[0]
			attention += prefill.AttentionFLOPs(r.Model, c.Cached, c.New)
			flops += r.FLOPs([]prefill.Request{{NewTokens: c.New, CachedTokens: c.Cached}})
			memory += mem(prefill.Request{NewTokens: c.New, CachedTokens: c.Cached})
			reexpanded += float64(c.Cached)
			kvRead += float64(c.Cached + c.New)
		}
		// Each chunk expands the whole prefix it attends over, the cached one and the earlier
		// chunks; one pass expands the cached prefix once.
		reexpansion := float64(r.Model.Layers) * prefill.CachedExpandFLOPs(r.Model) *
			(reexpanded - cached)
		extraPasses := float64(len(f.Passes) - 1)
		t.Logf("%s: chunked attention %.4g FLOPs against %.4g in one pass, re-expansion %.4g (MODELLED)",
			model, attention, prefill.AttentionFLOPs(r.Model, cached, fresh), reexpansion)
		closeTo := func(got, want float64) bool { return math.Abs(got-want) <= 1e-9*math.Abs(want) }
		if !closeTo(attention, prefill.AttentionFLOPs(r.Model, cached, fresh)+reexpansion) {
			t.Errorf("%s: the chunks' attention %g FLOPs, want one pass's %g and the re-expansion %g",
				model, attention, prefill.AttentionFLOPs(r.Model, cached, fresh), reexpansion)
		}
		if gqa := prefill.CachedExpandFLOPs(r.Model) == 0; gqa != (reexpansion == 0) {
			t.Errorf("%s: re-expansion %g FLOPs, want 0 exactly for a GQA model", model, reexpansion)
		}
		// Every chunk here takes the expanded path (8192 new tokens a chunk), as the whole does.
		if want := r.FLOPs([]prefill.Request{whole}) + reexpansion + extraPasses*head; !closeTo(flops, want) {
			t.Errorf("%s: the chunks' FLOPs %g, want one pass's %g, the re-expansion and %g output heads",
				model, flops, r.FLOPs([]prefill.Request{whole}), extraPasses)
		}
		if want := float64(len(f.Passes))*weights + kvRead*kv; !closeTo(memory, want) ||
			memory < mem(whole)+extraPasses*weights {
			t.Errorf("%s: the chunks' memory %g s, want the weights once a chunk and each chunk's KV: %g s",
				model, memory, want)
		}
	}
}

// TestPromptWithinTheBudgetIsPricedAsBefore: a pass whose new tokens fit the budget is one forward
// pass, priced as the whole pass was before chunking, whatever the hits and loads; a pass with a
// long request runs its chunks after all its loads.
func TestPromptWithinTheBudgetIsPricedAsBefore(t *testing.T) {
	m := perToken{newSeconds: 1e-4, cachedSeconds: 1e-6}
	state := uint64(5)
	next := func(n int64) int64 {
		state = state*6364136223846793005 + 1442695040888963407
		return int64(state>>33) % n
	}
	for trial := 0; trial < 200; trial++ {
		var hits []Hit
		var fresh int64
		for range 1 + next(6) {
			h := Hit{PromptTokens: 1 + next(1500)}
			h.L2 = next(h.PromptTokens + 1)
			h.L3 = next(h.PromptTokens - h.L2 + 1)
			hits = append(hits, h)
			fresh += h.Tokens().New
		}
		in := StepInput{FreeNs: 3 * ms, BatchStartNs: 1 * ms, Batch: hits, ChunkTokens: fresh}
		got, before := PlanStep(m, deferralLinks, in), PlanStep(m, deferralLinks, StepInput{
			FreeNs: 3 * ms, BatchStartNs: 1 * ms, Batch: hits,
		})
		cost := Cost(m, deferralLinks, hits)
		end := before.Batch.ComputeStartNs + Nanoseconds(cost.PrefillSeconds)
		if !reflect.DeepEqual(got, before) || got.Batch.Forwards != 1 || got.EndNs() != end {
			t.Fatalf("trial %d: %+v within the budget, %+v without one, want both one pass ending at %d",
				trial, got, before, end)
		}
		for i := range hits {
			if _, c := got.Request(false, i); c.FirstTokenNs != end || c.Chunks != 1 {
				t.Fatalf("trial %d: request %d %+v, want one chunk ending at %d", trial, i, c, end)
			}
		}
		in.ChunkTokens = max(1, fresh/3)
		chunked := PlanStep(m, deferralLinks, in)
		if chunked.Batch.ComputeStartNs != got.Batch.ComputeStartNs || chunked.EndNs() < got.EndNs() {
			t.Fatalf("trial %d: chunked %+v, in one pass %+v: want the same loads first, no earlier end",
				trial, chunked.Batch, got.Batch)
		}
	}
}

// TestEachRequestsFirstTokenIsItsOwnForwardPass: in a step of one pass, a short request deferred
// from the step before goes first, and its first token comes when its forward pass ends, before the
// long request after it ends its chunks; the short request after the long one fills its last
// chunk's forward pass and ends with it.
func TestEachRequestsFirstTokenIsItsOwnForwardPass(t *testing.T) {
	m := perToken{newSeconds: 1e-6}
	in := StepInput{
		FreeNs:      0,
		Deferred:    []Hit{{PromptTokens: 3000}},
		Batch:       []Hit{{PromptTokens: 20000}, {PromptTokens: 100}},
		ChunkTokens: 8192,
	}
	p := PlanStep(m, Links{}, in)
	_, short := p.Request(true, 0)
	_, long := p.Request(false, 0)
	_, after := p.Request(false, 1)
	if short != (Chunks{Chunks: 1, FirstTokenNs: 8192 * 1000}) ||
		long != (Chunks{Chunks: 3, FirstTokenNs: 23100 * 1000}) ||
		after != (Chunks{Chunks: 1, FirstTokenNs: 23100 * 1000}) ||
		p.Batch.Forwards != 3 || p.EndNs() != 23100*1000 {
		t.Fatalf("PlanStep = %+v: short %+v, long %+v, after %+v", p, short, long, after)
	}
}
