package hicache

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// The controller, run as N ranks in one process, against the plain model of the cache (cachemodel_test.go):
// every rank must make the model's decisions, request by request.

// modelPageTokens is small so that short prompts span several pages and forks fall mid-page.
const modelPageTokens = 4

func modelConfig(devicePages, slots int, policy WritePolicy) CacheConfig {
	return CacheConfig{
		Geometry: pool.Geometry{CPSize: 1, Layers: 1, PayloadsPerLayer: 2, PageTokens: modelPageTokens, TokenBytes: 8,
			Slots: slots, SlabBytesMax: 1 << 20, Layout: pool.LayerFirst},
		DevicePages: devicePages, Policy: policy, Seed: 3,
	}
}

// checkAgainstModel runs events on n in-process ranks and the model, and reports every difference: between
// each rank and the model, and between each rank and rank 0 (replicated determinism, whatever the model says).
func checkAgainstModel(t testing.TB, name string, cfg CacheConfig, n int, events []workload.Event, batch int) runTally {
	t.Helper()
	model := newCacheModel(cfg)
	model.run(events, batch)
	results := runInProcess(cfg, n, events, batch)
	for r, res := range results {
		where := fmt.Sprintf("%s, %s, %s, L1 %d pages, L2 %d slots, batch %d, N=%d, rank %d", name, cfg.Policy,
			cfg.Geometry.Layout, cfg.DevicePages, cfg.Geometry.Slots, batch, n, r)
		if res.err != nil {
			t.Fatalf("%s: %v", where, res.err)
		}
		compareOutcomes(t, where+" against rank 0", res.outcomes, results[0].outcomes)
		compareOutcomes(t, where+" against the model", res.outcomes, model.outcomes)
		if got := tallyOf(res.counters); got != model.tally {
			t.Errorf("%s: counters\n got   %+v\n model %+v", where, got, model.tally)
		}
		c := res.counters
		if c.Mismatches != 0 || c.AuditMismatches != 0 || c.CopyErrs != 0 || c.BackupCommitted != c.BackupReserved {
			t.Errorf("%s: %d mismatches, %d audit mismatches, %d copy errors, %d of %d backups committed",
				where, c.Mismatches, c.AuditMismatches, c.CopyErrs, c.BackupCommitted, c.BackupReserved)
		}
	}
	return model.tally
}

func compareOutcomes(t testing.TB, where string, got, want []reqOutcome) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d requests served, model %d", where, len(got), len(want))
		return
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("%s: request %d: %+v, model %+v", where, i, got[i], want[i])
			return // the first difference explains the rest
		}
	}
}

// modelSynthetic is the synthetic workload, small: shared system prompts that end mid-page, multi-turn
// conversations whose prompts extend the previous turn, and flushes.
func modelSynthetic(t testing.TB, seed uint64) []workload.Event {
	syn := workload.SyntheticConfig{Seed: seed, Conversations: 20, TurnsMax: 4, SystemPrompts: 3, SystemPromptTokens: 18,
		TurnTokens: 6, OutputTokens: 5, VocabSize: 97, FlushEvery: 16}
	events, err := workload.GenerateSynthetic(syn)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func req(ids ...int32) workload.Event {
	return workload.Event{Request: workload.Request{InputIDs: ids, OutputLen: 1}}
}

var flush = workload.Event{Flush: true}

// tokenRun returns n tokens from base: base, base+1, ...
func tokenRun(base int32, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = base + int32(i)
	}
	return out
}

func cat(parts ...[]int32) []int32 { return slices.Concat(parts...) }

// adversarialWorkloads are the corners: each is small enough to reason about by hand.
func adversarialWorkloads() map[string][]workload.Event {
	prefix := tokenRun(1, 6) // ends mid-way through the second page
	a, b := cat(prefix, tokenRun(100, 9)), cat(prefix, tokenRun(200, 9))
	long := tokenRun(500, 4*modelPageTokens*10) // more pages than L1 and L2 hold in the tight configs
	// Three 4-page prompts fill the tightest L1; the fourth must evict the least recently used, which is not
	// the oldest inserted once the first is hit again.
	p4 := func(k int32) []int32 { return tokenRun(1000*k, 4*modelPageTokens) }
	// 6-page prompts: two do not fit the tight L2s, and the second may evict the first only once its audit
	// hold is gone.
	p6 := func(k int32) []int32 { return tokenRun(2000*k, 6*modelPageTokens) }
	zero := workload.Event{Request: workload.Request{InputIDs: tokenRun(300, 12), OutputLen: 0}}
	return map[string][]workload.Event{
		"flush first":           {flush, req(a...), req(a...), flush, req(a...)},
		"double flush":          {req(a...), req(b...), flush, flush, req(a...), req(b...), flush},
		"zero output":           {zero, zero, req(cat(tokenRun(300, 12), tokenRun(7, 5))...), zero},
		"identical":             {req(a...), req(a...), req(a...), req(a...), req(b...), req(b...), req(a...)},
		"mid-page fork":         {req(a...), req(b...), req(a[:7]...), req(cat(a[:9], tokenRun(900, 8))...), req(b...), req(a...)},
		"shorter than page":     {req(1), req(1, 2, 3), req(1, 2, 3, 4), req(1, 2, 3), req(), req(1, 2, 3, 4, 5)},
		"too long":              {req(long...), req(a...), req(long...), req(a...), req(long[:12]...)},
		"lru order":             {req(p4(1)...), req(p4(2)...), req(p4(3)...), req(p4(1)...), req(p4(4)...), req(p4(2)...), req(p4(1)...), req(p4(3)...)},
		"audit hold":            {req(p6(1)...), req(p6(2)...), req(p6(1)...), req(p6(2)...), req(p6(3)...)},
		"fork of a node in use": {req(a...), req(a...), req(b...), req(b...), req(a...)},
		"fork at page":          {req(cat(tokenRun(1, 8), tokenRun(40, 8))...), req(cat(tokenRun(1, 8), tokenRun(60, 8))...), req(tokenRun(1, 8)...), req(tokenRun(1, 16)...)},
	}
}

type modelCase struct {
	devicePages, slots int
}

// modelCases: tight caches, where L1 and L2 evict all the time and long prompts do not fit; an L2 larger than
// L1, where evicted prefixes come back by load-backs; and a roomy one.
var modelCases = []modelCase{{12, 10}, {24, 12}, {40, 64}, {128, 256}}

var modelPolicies = []WritePolicy{WriteThrough, WriteThroughSelective, WriteBack}

// checkNoGoroutineLeak fails when goroutines started since before outlive the runs: every controller's copy
// worker and every engine's helpers must be gone once the runs have closed them. Helpers leave a moment after
// their engine closes, so it waits a little.
func checkNoGoroutineLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if now := runtime.NumGoroutine(); now > before {
		t.Errorf("%d goroutines left running after the in-process runs (%d before)", now-before, before)
	}
}

func TestInProcessSyntheticMatchesModel(t *testing.T) {
	skipUnlessOneRank(t)
	defer checkNoGoroutineLeak(t, runtime.NumGoroutine())
	for i, n := range []int{1, 2, 8} {
		for _, policy := range modelPolicies {
			var total runTally
			for _, mc := range modelCases {
				for _, batch := range []int{1, 3} {
					cfg := modelConfig(mc.devicePages, mc.slots, policy)
					// Layouts only move bytes (the audit reads them back); decisions must not change with them.
					cfg.Geometry.Layout = []pool.Layout{pool.LayerFirst, pool.PageFirst}[(i+batch)%2]
					seed := uint64(5 + batch)
					tally := checkAgainstModel(t, fmt.Sprintf("synthetic seed %d", seed), cfg, n, modelSynthetic(t, seed), batch)
					total.L1Evictions += tally.L1Evictions
					total.L2Evictions += tally.L2Evictions
					total.LoadBacks += tally.LoadBacks
				}
			}
			// The comparison means something only if the workload reaches every tier's eviction.
			if total.L1Evictions == 0 || total.L2Evictions == 0 || total.LoadBacks == 0 {
				t.Errorf("N=%d %s: the synthetic workload did not exercise the cache: %+v", n, policy, total)
			}
		}
	}
}

func TestInProcessAdversarialMatchesModel(t *testing.T) {
	skipUnlessOneRank(t)
	defer checkNoGoroutineLeak(t, runtime.NumGoroutine())
	for name, events := range adversarialWorkloads() {
		for _, n := range []int{1, 2, 8} {
			for _, policy := range modelPolicies {
				for _, mc := range modelCases[:2] {
					for _, batch := range []int{1, 2, 3} {
						checkAgainstModel(t, name, modelConfig(mc.devicePages, mc.slots, policy), n, events, batch)
					}
				}
			}
		}
	}
}

// fuzzBases are prompts the fuzzer's requests are cut from: base k shares its first forkAt(k) tokens with
// every other base, so requests share prefixes, fork mid-page or at a page end, and repeat.
func fuzzTokens(base, n int) []int32 {
	forkAt := (base * 5) % 23
	out := make([]int32, n)
	for i := range out {
		if i < forkAt {
			out[i] = int32(i + 1)
		} else {
			out[i] = int32(1000*(base+1) + i)
		}
	}
	return out
}

// fuzzWorkload reads a configuration and an event stream from data: five header bytes, then one byte per
// event (a flush, or a request cut from one of eight bases, 0..47 tokens long).
func fuzzWorkload(data []byte) (cfg CacheConfig, n, batch int, events []workload.Event, ok bool) {
	if len(data) < 5 {
		return cfg, 0, 0, nil, false
	}
	cfg = modelConfig(4+int(data[1]%16), 2+int(data[2]%20), modelPolicies[int(data[0])%len(modelPolicies)])
	n, batch = 1+int(data[3]%3), 1+int(data[4]%3)
	for i, b := range data[5:min(len(data), 5+96)] {
		if b%11 == 0 {
			events = append(events, flush)
			continue
		}
		length := int(b>>3) + int(data[(i+7)%len(data)]%17)
		events = append(events, workload.Event{Request: workload.Request{InputIDs: fuzzTokens(int(b%8), length), OutputLen: int32(b % 3)}})
	}
	return cfg, n, batch, events, true
}

func FuzzControllerAgainstModel(f *testing.F) {
	for _, seed := range [][]byte{
		{0, 6, 10, 1, 0, 8, 16, 24, 9, 17, 25, 10, 11, 42, 50, 58, 66, 74},
		{1, 12, 4, 0, 2, 200, 201, 202, 203, 204, 205, 206, 207, 0, 200, 201},
		{2, 3, 3, 1, 1, 255, 250, 245, 240, 22, 33, 44, 55, 66, 77, 88, 99},
		{0, 0, 0, 0, 0, 1, 1, 1, 1, 1},
		{2, 15, 19, 1, 2, 9, 17, 25, 33, 41, 49, 57, 65, 73, 81, 89, 97, 105, 113, 121, 129, 137},
	} {
		f.Add(seed)
	}
	// Reaches L1 eviction's tie-break: two candidates last used at the same clock, told apart by node id.
	f.Add([]byte("28102020181010k0z1000"))
	// Reaches L2 eviction's tie-break: objects reserved at the same clock, told apart by object id.
	f.Add([]byte("0100011%08001"))
	// Longer streams, for the pressure that makes both tiers evict.
	for k := range uint64(6) {
		seed := make([]byte, 64)
		for i := range seed {
			seed[i] = byte(pool.Mix64(k<<8 | uint64(i)))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		skipUnlessOneRank(t)
		cfg, n, batch, events, ok := fuzzWorkload(data)
		if !ok {
			return
		}
		checkAgainstModel(t, "fuzz", cfg, n, events, batch)
	})
}
