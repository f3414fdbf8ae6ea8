package serving

import (
	"math"
	"strings"
	"testing"
)

// TestNanosecondsNeverWrap: a modelled cost too long for int64 nanoseconds (292 years) is held at
// the longest one, never converted into a negative time that would make it free; NaN too. A step
// whose costs are that long (a prefill at an efficiency of 1e-12, 8.12e12 s; chunks of it) plans
// every time as non-decreasing, at most math.MaxInt64, and Check refuses it.
func TestNanosecondsNeverWrap(t *testing.T) {
	for _, s := range []float64{1e10, 9.3e9, 8.12e12, math.Inf(1), math.NaN()} {
		if got := Nanoseconds(s); got != math.MaxInt64 {
			t.Errorf("%v s: %d ns, want the longest, %d", s, got, int64(math.MaxInt64))
		}
	}
	if got := Nanoseconds(1.5); got != 1_500_000_000 {
		t.Errorf("1.5 s: %d ns", got)
	}
	huge := perToken{newSeconds: 1e10} // 1e10 s a token: every chunk overflows alone
	for _, in := range []StepInput{
		{FreeNs: 5 * ms, BatchStartNs: 5 * ms, Batch: []Hit{{PromptTokens: 10}}, ChunkTokens: 2},
		{FreeNs: 5 * ms, BatchStartNs: 5 * ms, Batch: []Hit{{PromptTokens: 1 << 30, L2: 1 << 30}}},
	} {
		l := Links{HostBytesPerSecond: 5, KVBytesPerToken: 1 << 20, GPUs: 1}
		p := PlanStep(huge, l, in)
		b := p.Batch
		if !(b.StartNs <= b.ComputeStartNs && b.ComputeStartNs <= b.EndNs) ||
			b.Requests[0].FirstTokenNs < b.ComputeStartNs {
			t.Errorf("%+v: a plan that goes back in time: %+v", in, p)
		}
		if err := p.Check(); err == nil {
			t.Errorf("%+v: a step of %d ns is not refused", in, p.EndNs()-in.FreeNs)
		}
	}
}

// TestStepCheckRefusesAStepNoRunCanSpend: a step whose modelled loads or compute pass MaxStepSeconds
// is refused, saying which and how long (a load-back of a 100K-token Llama-3.1-8B prompt, 13.1 GB, at
// 5 bytes/s: 2.6e9 s, 83 years, which the serving clock would have spent on the wall); the longest
// step a table gives (a cold 1M-token prefill of DeepSeek-V3 on one H20, 37,622 s) and a load at
// the rate floor (1M tokens of GLM-4.5 at 1 MB/s, 395,137 s) pass, and an idle wait between two
// passes (an arrival a long time later) is not the step's cost.
func TestStepCheckRefusesAStepNoRunCanSpend(t *testing.T) {
	l := Links{HostBytesPerSecond: 5, KVBytesPerToken: 131072, GPUs: 1}
	in := StepInput{Batch: []Hit{{PromptTokens: 100_000, L2: 99_968}}}
	p := PlanStep(perToken{newSeconds: 1e-4}, l, in)
	err := p.Check()
	if err == nil {
		t.Fatal("a load-back of 2.6e9 s is not refused")
	}
	for _, want := range []string{"load", "years", "1e+06 s", "--host-link-rate", "--prefill-efficiency"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q says nothing of %q", err, want)
		}
	}
	compute := PlanStep(perToken{newSeconds: 1e3}, Links{}, StepInput{Batch: []Hit{{PromptTokens: 1e4}}})
	if err := compute.Check(); err == nil || !strings.Contains(err.Error(), "compute") {
		t.Errorf("a compute of 1e7 s: %v", err)
	}
	for _, seconds := range []float64{37_622, 395_137, MaxStepSeconds - 1} {
		ok := PlanStep(perToken{newSeconds: seconds}, Links{}, StepInput{Batch: []Hit{{PromptTokens: 1}}})
		if err := ok.Check(); err != nil {
			t.Errorf("a step of %v s: %v", seconds, err)
		}
	}
	idle := PlanStep(perToken{newSeconds: 1}, deferralLinks, StepInput{
		FreeNs: 0, BatchStartNs: 2 * int64(MaxStepSeconds) * 1e9,
		Deferred: []Hit{{PromptTokens: 3}}, Batch: []Hit{{PromptTokens: 3}},
	})
	if err := idle.Check(); !idle.TwoPasses || err != nil {
		t.Errorf("two passes %v with an idle wait of %d ns between them: %v", idle.TwoPasses,
			idle.IdleNs(), err)
	}
}
