package serving

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/prefill"
)

// roofline adapts the prefill package's roofline to a serving Prefill, as the runner does.
type roofline struct{ r *prefill.Roofline }

func (m roofline) BatchSeconds(batch []Tokens) float64 {
	reqs := make([]prefill.Request, len(batch))
	for i, t := range batch {
		reqs[i] = prefill.Request{NewTokens: t.New, CachedTokens: t.Cached}
	}
	return m.r.BatchSeconds(reqs)
}

func newRoofline(t *testing.T, model string) roofline {
	t.Helper()
	return newRooflineIn(t, model, "")
}

// newRooflineIn is the model's roofline on 8 H200s in dtype ("" for its served precision).
func newRooflineIn(t *testing.T, model, dtype string) roofline {
	t.Helper()
	m, err := prefill.New(prefill.Options{
		Model:      model,
		GPU:        "h200",
		GroupGPUs:  8,
		DType:      dtype,
		Efficiency: prefill.DefaultEfficiency,
	})
	if err != nil {
		t.Fatal(err)
	}
	return roofline{m.(*prefill.Roofline)}
}

// TestFullHitIsNeverFree: a prompt whose every token is in L1 still computes its last token over
// the rest, so its step costs a forward pass, and no less than the same prompt with one token fewer
// cached.
func TestFullHitIsNeverFree(t *testing.T) {
	for _, model := range []string{"llama-3.1-8b", "deepseek-v3"} {
		m := newRoofline(t, model)
		full := Cost(m, Links{}, []Hit{{PromptTokens: 32768, L1: 32768}})
		if !(full.PrefillSeconds > 0) {
			t.Errorf("%s: a full L1 hit prefills in %g s, want > 0", model, full.PrefillSeconds)
		}
		one := Cost(m, Links{}, []Hit{{PromptTokens: 32768, L1: 32767}})
		if full.PrefillSeconds != one.PrefillSeconds {
			t.Errorf("%s: full hit %g s, one token computed %g s: want equal",
				model, full.PrefillSeconds, one.PrefillSeconds)
		}
	}
}

// TestSeventyPercentHitCutsTTFT: an L2 that serves 70% of a 32K-token prompt on 8 H200s cuts its
// TTFT by between 55% and 75% of its cold prefill (the loads charged before the prefill), in one
// forward pass and chunked by the default --step-tokens (8192) as the serving clock computes it,
// where the cold prompt runs 4 chunks and the warm one 2, each expanding an MLA model's prefix
// again. An L3 at one node's 40 GiB/s pays its read before the load-back, so it cuts less: today
// 50% to 55%, below the band (reported in issue 45's work, not loosened), so it is held to cutting,
// and to no more than the L2. The band was set in bf16; DeepSeek-V3 in its served fp8 runs its
// linear layers twice as fast and its attention (bf16) no faster, so the attention over the cached
// prefix, which a hit does not save, is a larger share of what is left: it cuts about 54%
// (reported, and held to its own band, not the bf16 one widened).
func TestSeventyPercentHitCutsTTFT(t *testing.T) {
	for _, tc := range []struct {
		model, dtype string
		low, high    float64
	}{
		{"llama-3.1-70b", "", 0.55, 0.75},
		{"deepseek-v3", "bf16", 0.55, 0.75},
		{"deepseek-v3", "fp8", 0.52, 0.56}, // its served precision
	} {
		m := newRooflineIn(t, tc.model, tc.dtype)
		name := tc.model + " in " + m.r.DType.String()
		l := Links{
			HostBytesPerSecond: 64e9, L3BytesPerSecond: 40 << 30,
			KVBytesPerToken: m.r.Model.TokenBytes(), GPUs: 8, Nodes: 1,
		}
		const prompt, hit = 32768, 32768 * 7 / 10
		for _, chunkTokens := range []int64{0, 8192} {
			cost := func(h Hit) float64 { return ChunkedCost(m, l, []Hit{h}, chunkTokens).Seconds() }
			cold := cost(Hit{PromptTokens: prompt})
			cut := func(h Hit) float64 { return (cold - cost(h)) / cold }
			l2 := cut(Hit{PromptTokens: prompt, L2: hit})
			l3 := cut(Hit{PromptTokens: prompt, L3: hit})
			t.Logf("%s, chunks of %d new tokens (0: one pass): TTFT cut L2 %.3f, L3 %.3f of %g s (MODELLED)",
				name, chunkTokens, l2, l3, cold)
			if l2 < tc.low || l2 > tc.high {
				t.Errorf("%s L2, chunks of %d: cut %.3f, want %.2f to %.2f",
					name, chunkTokens, l2, tc.low, tc.high)
			}
			if !(l3 > 0 && l3 <= l2) {
				t.Errorf("%s L3, chunks of %d: cut %.3f, want above 0 and no more than the L2's %.3f",
					name, chunkTokens, l3, l2)
			}
		}
	}
}
