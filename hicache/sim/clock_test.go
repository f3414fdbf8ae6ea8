package sim

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// TestServingClockJobsFindNothing: serving-clock jobs from a fixed seed break no invariant, and
// reach what the checks are for: every way of arriving and both prefill models, the record
// compared with the ideal (equal to it, the machinery's cost shown, the floor held), the ideal
// beaten after the clocks formed a step of other requests and after they passed one differently
// (SIMSERVING.md says why it may be), the charges, and steps of every shape: chunked requests, two
// passes, empty (every client waiting), and costly to the machinery.
func TestServingClockJobsFindNothing(t *testing.T) {
	var arrivals [arrivalKinds]int
	var profiles, rooflines, zeroCost int
	res := Run(Options{Seed: 1, Jobs: 400, Mode: ModeServing, Report: func(j JobResult) {
		c := j.Config.Clock
		arrivals[c.Arrivals]++
		if c.Model == "" {
			profiles++
		} else {
			rooflines++
		}
		if c.TickLoad == 0 {
			zeroCost++
		}
	}})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	s := res.Served
	t.Logf("%d jobs (%v by arrival, %d profiles, %d rooflines, %d costing nothing): %+v",
		res.Jobs, arrivals, profiles, rooflines, zeroCost, s)
	if arrivals[ArrivePoisson] == 0 || arrivals[ArriveTrace] == 0 || arrivals[ArriveClients] == 0 ||
		profiles == 0 || rooflines == 0 || zeroCost == 0 {
		t.Errorf("the jobs miss a kind: arrivals %v, %d profiles, %d rooflines, %d costing nothing",
			arrivals, profiles, rooflines, zeroCost)
	}
	if s.Jobs == 0 || s.Equal == 0 || s.CostShown == 0 || s.Floors == 0 || s.BreaksFormed == 0 ||
		s.BreaksPassed == 0 || s.Longer == 0 || s.Strict == 0 || s.Slower == 0 ||
		s.LoadFloors == 0 || s.Chunked == 0 || s.ChunkedRequests == 0 || s.TwoPassSteps == 0 ||
		s.EmptySteps == 0 || s.CostlySteps == 0 {
		t.Errorf("a check never ran: %+v", s)
	}
}

// TestAClockThatCostsNothingIsTheIdeal: with a machinery that costs nothing (no scheduler tick
// counts), every request of every group that ran to its end is timed exactly as the virtual replay
// times it.
func TestAClockThatCostsNothingIsTheIdeal(t *testing.T) {
	res := Run(Options{Seed: 2, Jobs: 150, Mode: ModeServing, Configure: func(j *JobConfig) {
		j.Clock.TickLoad = 0
	}})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if s := res.Served; s.Requests == 0 || s.Equal != s.Requests || s.CostShown != 0 {
		t.Errorf("%d requests compared, %d equal to the ideal, %d groups with a costly step: want all equal",
			s.Requests, s.Equal, s.CostShown)
	}
}

// TestServingClockJobsReplayExactly: a serving-clock job seed replays to the same state hash, its
// first tokens included; and drawing serving-clock jobs changed no job of the other modes (their
// run hashes as on the tree before them, 60 jobs from seed 1; recorded again once jobs drew their
// L2 policy, issue 49, on that branch's tip a46a8b5, which has no serving-clock jobs).
func TestServingClockJobsReplayExactly(t *testing.T) {
	a, b := Run(Options{Seed: 5, Jobs: 30, Mode: ModeServing}),
		Run(Options{Seed: 5, Jobs: 30, Mode: ModeServing})
	if a.Hash != b.Hash || a.Steps != b.Steps || a.Violation != nil {
		t.Errorf("seed 5 twice: hash %016x and %016x, steps %d and %d (%v)",
			a.Hash, b.Hash, a.Steps, b.Steps, a.Violation)
	}
	for mode, want := range map[Mode]uint64{
		ModeAll:      0x46bc5671fbb275d4,
		ModePlain:    0x7eb0b9ba99834bb3,
		ModeSwarm:    0x056129a47440ef16,
		ModeLiveness: 0x87d35a40a3722a63,
	} {
		if got := Run(Options{Seed: 1, Jobs: 60, Mode: mode}).Hash; got != want {
			t.Errorf("mode %s: 60 jobs from seed 1 end with state hash %016x, before serving-clock jobs %016x",
				mode, got, want)
		}
	}
}

// TestEveryRankMustGetCPRankZerosBatch: a rank whose step differs from the one CP rank 0 sent, by
// an event or by its start, is a violation naming both (the check that catches
// batch_from_own_queue in a simbugs build); CP rank 0's own passes.
func TestEveryRankMustGetCPRankZerosBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(b []workload.Event, startNs int64) ([]workload.Event, int64)
		caught bool
	}{
		{"the same", func(b []workload.Event, s int64) ([]workload.Event, int64) { return b, s }, false},
		{"a later start", func(b []workload.Event, s int64) ([]workload.Event, int64) { return b, s + 1 }, true},
		{"one event fewer", func(b []workload.Event, s int64) ([]workload.Event, int64) {
			return b[:len(b)-1], s
		}, true},
		{"the stream's end", func([]workload.Event, int64) ([]workload.Event, int64) { return nil, 0 }, true},
	} {
		j, err := newJob(DrawMode(JobSeed(1, 0), 0, 2, ModeServing))
		if err != nil {
			t.Fatal(err)
		}
		g := j.groups[0]
		g.ranks[0].formStep(1)
		if len(g.sent[1]) == 0 {
			t.Fatalf("%s: the first step is empty", tc.name)
		}
		batch, startNs := tc.change(g.sent[1], g.sentStart[1])
		g.ranks[1].checkSent(1, batch, startNs)
		if caught := j.violation != nil &&
			strings.Contains(j.violation.What, "every rank must get CP rank 0's"); caught != tc.caught {
			t.Errorf("%s: caught %v, want %v (%v)", tc.name, caught, tc.caught, j.violation)
		}
	}
}

// TestChunkedPrefillCanChargeALongerPrefixMore: why the charge check leaves chunked passes out. The
// steps of two kept seeds, priced again: a prompt alone in memory-bound chunks, each of which reads
// the whole cached prefix again, costs more with one token more cached; and a request whose forward
// pass the next request's tokens fill costs more when it computes less, for the tokens that take
// its room attend over a longer prefix.
func TestChunkedPrefillCanChargeALongerPrefixMore(t *testing.T) {
	for _, tc := range []struct {
		name          string
		model, gpu    string
		dtype         string
		efficiency    float64
		cp            int
		in            serving.StepInput
		slot, shorter int64
	}{
		{"memory-bound chunks (job seed 3311598501016068738)", "llama-3.1-8b", "h200", "fp8", 1, 8,
			serving.StepInput{
				ChunkTokens: 6,
				Batch:       []serving.Hit{{PromptTokens: 15, L1: 6}},
			}, 0, 1},
		{"the next request fills the pass (job seed 13290486572345175640)", "llama-3.1-70b", "gb200", "bf16", 0.3, 4,
			serving.StepInput{ChunkTokens: 608,
				Deferred: []serving.Hit{{PromptTokens: 416, L3: 32}},
				Batch: []serving.Hit{{PromptTokens: 96, L1: 80}, {PromptTokens: 96, L1: 64},
					{PromptTokens: 128, L1: 96}, {PromptTokens: 176, L1: 16}}}, 0, 16},
	} {
		c := &ClockConfig{Model: tc.model, GPU: tc.gpu, DType: tc.dtype, Efficiency: tc.efficiency}
		pm, err := c.prefillModel(tc.cp)
		if err != nil {
			t.Fatal(err)
		}
		p := modelAdapter{pm}
		links := serving.Links{
			HostBytesPerSecond: 64e9,
			L3BytesPerSecond:   40e9,
			KVBytesPerToken:    1 << 17,
			GPUs:               tc.cp,
			Nodes:              1,
		}
		pass, own := serving.PlanStep(p, links, tc.in).Request(false, int(tc.slot))
		short := tc.in
		short.Batch = append([]serving.Hit(nil), tc.in.Batch...)
		short.Batch[tc.slot].L1 -= tc.shorter
		vpass, v := serving.PlanStep(p, links, short).Request(false, int(tc.slot))
		t.Logf("%s: first token %d ns with the longer prefix, %d ns with %d tokens fewer cached (MODELLED)",
			tc.name, own.FirstTokenNs, v.FirstTokenNs, tc.shorter)
		if pass.Forwards < 2 || vpass.Forwards < 2 || !(own.FirstTokenNs > v.FirstTokenNs) {
			t.Errorf("%s: %d and %d forward passes, first tokens %d and %d ns: want chunks, the longer prefix later",
				tc.name, pass.Forwards, vpass.Forwards, own.FirstTokenNs, v.FirstTokenNs)
		}
	}
}
