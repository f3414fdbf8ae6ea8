package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/internal/errscope"
)

// TestGeometryFromTheModelAndTheGPU: with no geometry given, L1 is a GPU's KV budget, 0.9 of its
// HBM less its share of the weights (DeepSeek-V3 in fp8 on 8 H200s: 0.9 x 141 GB - 671 GB / 8 =
// 43.0 GB a GPU), and L2 twice L1; the summary's SizedBy says the rule. Weights that leave a GPU
// no KV (the same model on 2 H200s) are refused, naming --device-bytes.
func TestGeometryFromTheModelAndTheGPU(t *testing.T) {
	o := &Options{
		Layers: 1, PayloadsPerLayer: 1, PageTokens: 64, TokenBytes: 8, DevicePages: 512,
		L2Slots: 2048, L1FromGPU: true, L2FromL1: true,
		Serving: &ServingOptions{Prefill: prefill.Options{Model: "deepseek-v3", GPU: "h200",
			Efficiency: prefill.DefaultEfficiency}},
	}
	sized, err := o.Size(8, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	kv := 0.9*141e9 - 671e9/8.0
	if got := float64(sized.DeviceBytes); got < kv*0.99 || got > kv*1.01 {
		t.Errorf("L1 %g bytes a GPU, want about %g", got, kv)
	}
	if wantPages := int(kv * 8 / (64 * 70272)); sized.DevicePages < wantPages-1 ||
		sized.DevicePages > wantPages+1 || sized.L2Slots != 2*sized.DevicePages {
		t.Errorf("L1 %d pages, L2 %d slots: want about %d and twice it", sized.DevicePages,
			sized.L2Slots, wantPages)
	}
	for _, want := range []string{"0.9 x 141 GB of HBM", "deepseek-v3's fp8 weights over 8 GPUs",
		"L2 2 x L1 (SGLang's --hicache-ratio default)"} {
		if !strings.Contains(sized.SizedBy, want) {
			t.Errorf("SizedBy lacks %q: %s", want, sized.SizedBy)
		}
	}
	_, err = o.Size(2, 2, 1)
	var ce *errscope.ConfigError
	if !errors.As(err, &ce) || ce.Flag != "device-bytes" {
		t.Errorf("DeepSeek-V3 on 2 H200s: %v, want an invalid --device-bytes (no KV left)", err)
	}
	// The flags' geometry stands when no model sizes it.
	o.Serving.Prefill.Model = ""
	if plain, err := o.Size(8, 8, 1); err != nil || plain.DevicePages != 512 ||
		plain.L2Slots != 2048 || plain.SizedBy != "" {
		t.Errorf("without a model: %v, %+v", err, plain)
	}
}
