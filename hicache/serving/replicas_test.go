package serving

import "testing"

// overloaded is n requests of 1,000 computed tokens arriving every 5 ms, on a group that computes
// a token in 10 us: 200,000 tokens a second asked of a group that serves 100,000, so the queue
// grows the whole replay.
func overloaded(n int) []Record {
	records := make([]Record, n)
	for i := range records {
		records[i] = Record{ArrivalNs: int64(i) * 5e6, Hit: Hit{PromptTokens: 1000}}
	}
	return records
}

// TestLoadSetsTheDemandBesideWhatTheGroupServes: the demand is the prompt tokens over the span of
// their arrivals, the capacity the prompt tokens over the group's busy time (a step of one 1,000
// token request takes 10 ms), and under a growing queue the queue is most of the mean TTFT.
func TestLoadSetsTheDemandBesideWhatTheGroupServes(t *testing.T) {
	records := overloaded(200)
	b := Batching{StepTokens: 1000, MaxRequests: 1}
	r := VirtualReplay(records, b, perToken{newSeconds: 10e-6}, Links{}, Clients{})
	load := LoadOf(records, r, Clients{})
	// 200 x 1000 tokens over 199 x 5 ms of arrivals; 200 steps of 10 ms (the last token of each is
	// computed, whatever its hits).
	if want := 200e3 / (199 * 5e-3); load.DemandTokensPerSecond < want*0.999 ||
		load.DemandTokensPerSecond > want*1.001 {
		t.Errorf("demand %g tokens/s, want %g", load.DemandTokensPerSecond, want)
	}
	if load.CapacityTokensPerSecond < 99e3 || load.CapacityTokensPerSecond > 101e3 {
		t.Errorf("capacity %g tokens/s, want 100,000", load.CapacityTokensPerSecond)
	}
	if load.QueueShare < 0.9 || load.QueueShare >= 1 {
		t.Errorf("the queue's share of the mean TTFT %g, want most of it", load.QueueShare)
	}
}

// TestReplicasBringTheTTFTUnderTheTarget: split over the replicas it finds, the replay's TTFT p50
// meets the target, and over one fewer it does not; a target no number of replicas meets (under
// one step's own 10 ms) finds none.
func TestReplicasBringTheTTFTUnderTheTarget(t *testing.T) {
	records := overloaded(400)
	b := Batching{StepTokens: 1000, MaxRequests: 1}
	p := perToken{newSeconds: 10e-6}
	roundRobin := func(i, k int) int { return i % k }
	const target = 50e6 // 50 ms
	got := ReplicasFor(records, roundRobin, b, p, Links{}, Clients{}, target, 64, NearestRank)
	if got.Replicas < 2 || got.TTFTP50 > 0.050 {
		t.Fatalf("%+v: want 2 or more replicas, TTFT p50 at most 50 ms", got)
	}
	if fewer := splitP50(records, roundRobin, b, p, Links{}, got.Replicas-1, NearestRank); fewer <= 0.050 {
		t.Errorf("%d replicas meet the target too (p50 %g s): %d is not the fewest",
			got.Replicas-1, fewer, got.Replicas)
	}
	if none := ReplicasFor(records, roundRobin, b, p, Links{}, Clients{}, 5e6, 64,
		NearestRank); none.Replicas != 0 ||
		none.TTFTP50 < 0.010 {
		t.Errorf("a 5 ms target under a 10 ms step: %+v, want none", none)
	}
}

// TestReplicasAreTheFewestWhereTheP50RisesWithK: the TTFT p50 need not fall as the replicas grow
// (which requests share a replica changes with k), so the search finds the fewest that meet the
// target however the p50 runs. Here 3 replicas share the load round robin, while at every other k
// the split sends every request to one replica, whose queue grows as on one group: only k = 3
// meets 50 ms, which a search by doubling k (1, 2, 4, ...) never tries.
func TestReplicasAreTheFewestWhereTheP50RisesWithK(t *testing.T) {
	records := overloaded(400)
	b := Batching{StepTokens: 1000, MaxRequests: 1}
	p := perToken{newSeconds: 10e-6}
	onlyThree := func(i, k int) int {
		if k == 3 {
			return i % 3
		}
		return 0
	}
	const target = 50e6 // 50 ms
	if p2, p4 := splitP50(records, onlyThree, b, p, Links{}, 2, NearestRank),
		splitP50(records, onlyThree, b, p, Links{}, 4, NearestRank); p2 <= 0.050 || p4 <= 0.050 {
		t.Fatalf("p50 at 2 and 4 replicas %g s and %g s: want both over the target", p2, p4)
	}
	got := ReplicasFor(records, onlyThree, b, p, Links{}, Clients{}, target, 64, NearestRank)
	if got.Replicas != 3 || got.TTFTP50 > 0.050 || got.Max != 64 {
		t.Errorf("%+v: want 3 replicas, TTFT p50 at most 50 ms, every k up to 64 tried", got)
	}
}

// TestPerRankCopiesLoadTheWholeKVOverEachLink: per-rank copies (the design the shared L2 replaces)
// load a hit's whole KV over each GPU's link, cp times the bytes of a GPU's share of the shared
// pool's load, so the load takes cp times as long.
func TestPerRankCopiesLoadTheWholeKVOverEachLink(t *testing.T) {
	shared := Links{HostBytesPerSecond: 64e9, KVBytesPerToken: 70272, GPUs: 8}
	perRank := shared
	perRank.WholeCopies = true
	if s, p := shared.LoadSeconds(100_000), perRank.LoadSeconds(100_000); s <= 0 || p != 8*s {
		t.Errorf("a 100K-token load: shared %g s, per-rank copies %g s, want 8 times it", s, p)
	}
}
