package prefill

import (
	"math"
	"strings"
	"testing"
)

// TestEfficiencyPrintedAsGiven: the summary prints --prefill-efficiency as the user wrote it, not
// rounded (0.116, not 0.12), and a 1/B form with its value.
func TestEfficiencyPrintedAsGiven(t *testing.T) {
	for _, tc := range []struct {
		text, want string
	}{
		{"0.116", "efficiency 0.116"},
		{"0.5", "efficiency 0.5"},
		{"0.4375", "efficiency 0.4375"},
		{"1/0.116", "efficiency 1/0.116 = 8.621 (above 1: a fitted factor"},
	} {
		v, err := ParseEfficiency(tc.text)
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		m, err := New(Options{Model: "llama-3.1-8b", GPU: "h100", GroupGPUs: 1,
			Efficiency: v, EfficiencyText: tc.text})
		if err != nil || !strings.Contains(m.Describe(), tc.want) {
			t.Errorf("%q: %v; %s, want %q", tc.text, err, m.Describe(), tc.want)
		}
	}
	// Without the text (a caller that has only the value), the shortest form that reads back.
	r, err := NewRoofline("llama-3.1-8b", "h100", 1, 0.116)
	if err != nil || !strings.HasSuffix(r.Describe(), "efficiency 0.116") {
		t.Errorf("%v: %s", err, r.Describe())
	}
}

// TestParseEfficiencyTakesPublishedFactors: a share (0.45, inference-sim's roofline mfuPrefill on
// H100), and 1/B for a factor B that multiplies compute time at the dense peak (its trained
// roofline's beta_1a, 0.116 to 0.152) are taken; nonsense, 0, a negative and past MaxEfficiency are
// refused naming the flag.
func TestParseEfficiencyTakesPublishedFactors(t *testing.T) {
	for text, want := range map[string]float64{
		"0.45": 0.45, "1/0.116": 1 / 0.116, "1/0.152128": 1 / 0.152128, " 0.5 ": 0.5, "8.6": 8.6,
		"100": 100, "1/2": 0.5,
	} {
		// want's quotients are exact constants; the parsed ones are rounded once
		if got, err := ParseEfficiency(text); err != nil || math.Abs(got-want) > 1e-15*want {
			t.Errorf("%q: %v %v, want %v", text, got, err, want)
		}
	}
	for _, text := range []string{"", "fast", "0", "-0.5", "1/0", "1/-2", "100.5", "1/0.001", "NaN",
		"Inf", "50%"} {
		if _, err := ParseEfficiency(text); !isFlagError(err, "prefill-efficiency") {
			t.Errorf("%q: %v, want an invalid --prefill-efficiency", text, err)
		}
	}
}

// TestEfficiencyOneOverAFactorIsThatFactorsComputeTime: at --prefill-efficiency 1/B the roofline's
// compute time is exactly B x the FLOPs at the dense peak, inference-sim's trained prefill compute
// term (beta_1a x T_pf_compute, with T_pf_compute at 100% of TFlopsPeak), for a bf16 model whose
// FLOPs both count alike; at E it is the FLOPs at E x the peak, its roofline's mfuPrefill.
func TestEfficiencyOneOverAFactorIsThatFactorsComputeTime(t *testing.T) {
	const beta = 0.116
	e, err := ParseEfficiency("1/0.116")
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewRoofline("llama-3.1-70b", "h100", 4, e)
	if err != nil {
		t.Fatal(err)
	}
	batch := []Request{{NewTokens: 4096, CachedTokens: 1024}}
	atPeak := r.FLOPs(batch) / (4 * 989.5e12)
	if got := r.ComputeSeconds(batch); math.Abs(got-beta*atPeak) > 1e-12*atPeak {
		t.Errorf("compute at 1/%v: %v s, want %v x %v s", beta, got, beta, atPeak)
	}
	mfu, err := NewRoofline("llama-3.1-70b", "h100", 4, 0.45)
	if err != nil {
		t.Fatal(err)
	}
	if got := mfu.ComputeSeconds(batch); math.Abs(got-atPeak/0.45) > 1e-12*atPeak {
		t.Errorf("compute at 0.45: %v s, want %v s / 0.45", got, atPeak)
	}
}
