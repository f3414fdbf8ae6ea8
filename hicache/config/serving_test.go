package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/internal/errscope"
)

// servingFor is DeepSeek-V3's roofline on 8 H200s, its host link given as rate (as --host-link-rate
// writes it; "" for the datasheet's), sized for a group of 8.
func servingFor(t *testing.T, rate string, bytesPerSecond float64) *ServingOptions {
	t.Helper()
	o := &ServingOptions{
		Prefill:                prefill.Options{Model: "deepseek-v3", GPU: "h200", Efficiency: 0.5},
		HostLinkBytesPerSecond: bytesPerSecond,
		HostLinkRate:           rate,
		L3ReadBytesPerSecond:   40 << 30,
		TimeScale:              1,
	}
	o.Batching.StepTokens, o.Batching.MaxRequests = 8192, 64
	if err := o.Check(); err != nil {
		t.Fatal(err)
	}
	sized, err := o.sized(&Options{Layers: 1, PayloadsPerLayer: 1, AccountTokenBytes: 8}, 8)
	if err != nil {
		t.Fatal(err)
	}
	return sized
}

// TestHostLinkRateTimesLoadBacksAndBreakEven: --host-link-rate replaces the GPU's datasheet rate in
// the serving clock's links (the L2's load-backs) and in the break-even lines, and the summary, the
// report's model line and the provenance say which rate it was and where it came from.
func TestHostLinkRateTimesLoadBacksAndBreakEven(t *testing.T) {
	datasheet, measured := servingFor(t, "", 0), servingFor(t, "35GB/s", 35e9)
	if datasheet.Links.HostBytesPerSecond != 64e9 || measured.Links.HostBytesPerSecond != 35e9 {
		t.Errorf("links' host rate: datasheet %v, measured %v B/s",
			datasheet.Links.HostBytesPerSecond, measured.Links.HostBytesPerSecond)
	}
	tokens := int64(100_000)
	if d, m := datasheet.Links.LoadSeconds(tokens), measured.Links.LoadSeconds(tokens); !(m > d) ||
		m*35 < d*64*0.999999 || m*35 > d*64*1.000001 {
		t.Errorf("a load-back of %d tokens: %v s at the datasheet's rate, %v s at 35 GB/s",
			tokens, d, m)
	}
	for _, tc := range []struct {
		o               *ServingOptions
		rate, origin    string
		breakEvenTier   string
		provenanceValue string
	}{
		{datasheet, "host link 64 GB/s each way a GPU", "PCIe Gen5 x16, h200's datasheet rate",
			"L2 host link 477 GiB/s", "64GB/s (h200's datasheet, PCIe Gen5 x16)"},
		{measured, "host link 35 GB/s each way a GPU", "--host-link-rate 35GB/s: the user's",
			"L2 host link 261 GiB/s", "35GB/s (the user's)"},
	} {
		lines := tc.o.BreakEven()
		for _, text := range []string{tc.o.ModelName, lines[0]} {
			if !strings.Contains(text, tc.rate) || !strings.Contains(text, tc.origin) {
				t.Errorf("%q: want %q and %q", text, tc.rate, tc.origin)
			}
		}
		if !strings.Contains(lines[1], tc.breakEvenTier) {
			t.Errorf("%q: want %q (8 GPUs' links)", lines[1], tc.breakEvenTier)
		}
		flags := tc.o.ResolvedFlags()
		if flags["host-link-rate"] != tc.provenanceValue || flags["prefill-dtype"] != "fp8" {
			t.Errorf("provenance's flags %v, want host-link-rate %q and prefill-dtype fp8",
				flags, tc.provenanceValue)
		}
	}
}

// TestServingCheckNamesTheNewFlags: a bad --prefill-dtype (even beside a profile, which does not
// use it), fp4 on an H100, and a host link rate of nothing are refused naming their flags.
func TestServingCheckNamesTheNewFlags(t *testing.T) {
	for flag, spoil := range map[string]func(o *ServingOptions){
		"prefill-dtype":  func(o *ServingOptions) { o.Prefill.DType = "int8" },
		"host-link-rate": func(o *ServingOptions) { o.HostLinkRate, o.HostLinkBytesPerSecond = "0", 0 },
	} {
		o := servingFor(t, "", 0)
		spoil(o)
		if err := o.Check(); !isFlag(err, flag) {
			t.Errorf("spoiled --%s: %v", flag, err)
		}
	}
	o := servingFor(t, "", 0)
	o.Prefill.GPU, o.Prefill.DType = "h100", "fp4"
	if err := o.Check(); !isFlag(err, "prefill-dtype") {
		t.Errorf("fp4 on h100: %v", err)
	}
}

func isFlag(err error, flag string) bool {
	var ce *errscope.ConfigError
	return errors.As(err, &ce) && ce.Flag == flag
}
