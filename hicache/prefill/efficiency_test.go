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
// roofline's beta_1a, 0.116 to 0.152) are taken; nonsense, 0, a negative and 1/B past
// MaxEfficiency (B below 0.01) are refused naming the flag.
func TestParseEfficiencyTakesPublishedFactors(t *testing.T) {
	for text, want := range map[string]float64{
		"0.45": 0.45, "1/0.116": 1 / 0.116, "1/0.152128": 1 / 0.152128, " 0.5 ": 0.5, "1": 1,
		"1/0.01": 100, "1/2": 0.5, "1/ 0.116": 1 / 0.116,
	} {
		// want's quotients are exact constants; the parsed ones are rounded once
		if got, err := ParseEfficiency(text); err != nil || math.Abs(got-want) > 1e-15*want {
			t.Errorf("%q: %v %v, want %v", text, got, err, want)
		}
	}
	for _, text := range []string{"", "fast", "0", "-0.5", "1/0", "1/-2", "1/0.0099", "1/0.001",
		"NaN", "Inf", "50%", "1/NaN", "1/Inf"} {
		if _, err := ParseEfficiency(text); !isFlagError(err, "prefill-efficiency") {
			t.Errorf("%q: %v, want an invalid --prefill-efficiency", text, err)
		}
	}
}

// TestPlainEfficiencyAboveOneIsRefused: a plain value is a share of the dense peaks, in (0, 1]:
// 50 (meant as 50%) once ran the roofline at 50 times the datasheet's peak: a cold 100K-token
// prefill of Llama-3.1-8B on one H100 in 81 ms rather than 8.12 s. Above 1 only the 1/B form of a
// fitted factor is taken, and the refusal says to write it so (with B's range) and what a share is.
func TestPlainEfficiencyAboveOneIsRefused(t *testing.T) {
	for _, text := range []string{"50", "8.6", "100", "1.0001", "2"} {
		_, err := ParseEfficiency(text)
		if !isFlagError(err, "prefill-efficiency") {
			t.Fatalf("%q: %v, want an invalid --prefill-efficiency", text, err)
		}
		for _, want := range []string{"(0, 1]", "1/B", "1/0.116", "at least 0.01", "0.5"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%q: %q says nothing of %q", text, err, want)
			}
		}
	}
	if _, err := ParseEfficiency("1/0.02"); err != nil { // 50 as a fitted factor's form
		t.Errorf("1/0.02: %v", err)
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
