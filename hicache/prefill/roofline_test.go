package prefill

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

func isFlagError(err error, flag string) bool {
	var ce *errscope.ConfigError
	return errors.As(err, &ce) && ce.Flag == flag
}

// roofline is the model's roofline in its served precision at the default efficiency.
func roofline(t *testing.T, model, gpu string, groupGPUs int) *Roofline {
	t.Helper()
	return rooflineIn(t, model, gpu, groupGPUs, "")
}

// rooflineIn is the model's roofline in dtype ("" for its served precision) at the default
// efficiency.
func rooflineIn(t *testing.T, model, gpu string, groupGPUs int, dtype string) *Roofline {
	t.Helper()
	m, err := New(Options{
		Model:      model,
		GPU:        gpu,
		GroupGPUs:  groupGPUs,
		DType:      dtype,
		Efficiency: DefaultEfficiency,
	})
	if err != nil {
		t.Fatal(err)
	}
	return m.(*Roofline)
}

// TestLookupGPU: the table's parts by name, any case, with their dense (not sparse) bf16 rates; an
// unknown name is an invalid --gpu listing the choices.
func TestLookupGPU(t *testing.T) {
	for name, flops := range map[string]float64{"h100": 989.5e12, "H200": 989.5e12, "b200": 2.25e15, "h800": 989.5e12} {
		g, err := LookupGPU(name)
		if err != nil || g.Dense.BF16 != flops || g.HBMBytesPerSecond < 3e12 ||
			g.HostBytesPerSecond != 64e9 ||
			g.Source == "" {
			t.Errorf("%s: %+v %v", name, g, err)
		}
	}
	if _, err := LookupGPU("a100"); !isFlagError(err, "gpu") ||
		!strings.Contains(err.Error(), "h20, h20-3e, h100, h800, h200, b200, gb200, b300, mi300x, mi355x") {
		t.Errorf("an unknown GPU: %v, want an invalid --gpu naming the table", err)
	}
	if _, err := LookupGPU(DefaultGPU); err != nil {
		t.Errorf("the default GPU: %v", err)
	}
}

// TestNewRooflineNamesTheFlag: each bad input is a ConfigError naming its flag.
func TestNewRooflineNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		model, gpu string
		gpus       int
		efficiency float64
		flag       string
	}{
		{"gpt-5", "h100", 8, 0.5, "model"}, {"llama-3.1-8b", "tpu", 8, 0.5, "gpu"},
		{"llama-3.1-8b", "h100", 8, 0, "prefill-efficiency"}, {"llama-3.1-8b", "h100", 8, 100.5, "prefill-efficiency"},
		{"llama-3.1-8b", "h100", 8, math.NaN(), "prefill-efficiency"}, {"llama-3.1-8b", "h100", 0, 0.5, "cp"},
	} {
		if _, err := NewRoofline(tc.model, tc.gpu, tc.gpus, tc.efficiency); !isFlagError(
			err,
			tc.flag,
		) {
			t.Errorf("%+v: %v, want an invalid --%s", tc, err, tc.flag)
		}
	}
	for _, e := range []float64{1, 1 / 0.116, MaxEfficiency} {
		if _, err := NewRoofline("Llama-3.1-8B", "h100", 1, e); err != nil {
			t.Errorf("efficiency %v: %v", e, err)
		}
	}
}

// TestFLOPsByHand: Llama-3.1-8B, 1,000 new tokens after 3,000 cached. Linear: 2 x (8,030,261,248
// parameters - 2 x 128,256 x 4,096 of embedding and head) x 1,000 + the head once (2 x 525,336,576)
// = 13,960,226,865,152. Attention: 3,000 x 1,000 + 1,000 x 1,001 / 2 = 3,500,500 pairs a layer, 4 x
// 32 heads x 128 = 16,384 FLOPs a pair, 32 layers: 1,835,270,144,000.
func TestFLOPsByHand(t *testing.T) {
	r := roofline(t, "llama-3.1-8b", "h100", 1)
	linear, attention := LinearFLOPs(r.Model, 1000), AttentionFLOPs(r.Model, 3000, 1000)
	if linear != 13_960_226_865_152 || attention != 1_835_270_144_000 {
		t.Errorf("linear %.0f, attention %.0f", linear, attention)
	}
	if got := r.FLOPs([]Request{
		{NewTokens: 1000, CachedTokens: 3000}, {NewTokens: 0, CachedTokens: 5000},
	}); got != linear+attention {
		t.Errorf("a batch with an idle request: %.0f FLOPs, want %.0f", got, linear+attention)
	}
	want := (linear + attention) / (989.5e12 * DefaultEfficiency)
	if got := r.ComputeSeconds([]Request{{1000, 3000}}); math.Abs(got-want) > 1e-12*want {
		t.Errorf("compute %v s, want %v", got, want)
	}
}

// TestMLAFLOPsByHand: DeepSeek-V3's pair costs 2 x 128 heads x (128 + 64 + 128) = 81,920 FLOPs and
// each cached token's latent expansion 2 x 512 x 128 x (128 + 128) = 33,554,432 a layer; one new
// token after 10 cached: 61 x (11 x 81,920 + 10 x 33,554,432).
func TestMLAFLOPsByHand(t *testing.T) {
	m := roofline(t, "deepseek-v3", "h800", 8).Model
	if PairFLOPs(m) != 81_920 || CachedExpandFLOPs(m) != 33_554_432 {
		t.Errorf("pair %v, expand %v", PairFLOPs(m), CachedExpandFLOPs(m))
	}
	if got, want := AttentionFLOPs(m, 10, 1), 61*(11*81_920+10*33_554_432.0); got != want {
		t.Errorf("attention %v, want %v", got, want)
	}
	llama := roofline(t, "llama-3.1-70b", "h100", 1).Model
	if CachedExpandFLOPs(llama) != 0 {
		t.Errorf("a GQA model expands nothing: %v", CachedExpandFLOPs(llama))
	}
}

// TestRooflineGrowsWithNewAndCachedTokens: more new tokens or a longer cached prefix never takes
// less time, for every model, and a longer prefix costs strictly more compute.
func TestRooflineGrowsWithNewAndCachedTokens(t *testing.T) {
	for _, name := range sizing.ModelNames() {
		r := roofline(t, name, "h200", 8)
		for _, n := range []int64{1, 64, 1024, 16384} {
			prev, prevCompute := 0.0, 0.0
			for _, c := range []int64{0, 1, 512, 8192, 131072} {
				s, compute := r.BatchSeconds([]Request{{n, c}}), r.ComputeSeconds([]Request{{n, c}})
				if s < prev || compute <= prevCompute || r.BatchSeconds([]Request{{n + 1, c}}) < s {
					t.Errorf(
						"%s new %d cached %d: %v s (compute %v) after %v (%v)",
						name,
						n,
						c,
						s,
						compute,
						prev,
						prevCompute,
					)
				}
				prev, prevCompute = s, compute
			}
		}
		if r.BatchSeconds(nil) != 0 || r.BatchSeconds([]Request{{0, 4096}}) != 0 {
			t.Errorf("%s: an empty batch costs time", name)
		}
	}
}

// TestRooflineDividesOverTheGroup: CP's GPUs divide both the FLOPs and the bytes, so a group of 8
// takes an eighth of one GPU's time, compute- or memory-bound.
func TestRooflineDividesOverTheGroup(t *testing.T) {
	for _, batch := range [][]Request{{{1, 0}}, {{8192, 4096}, {512, 0}}} {
		one, eight := roofline(
			t,
			"llama-3.1-70b",
			"h100",
			1,
		), roofline(
			t,
			"llama-3.1-70b",
			"h100",
			8,
		)
		a, b := one.BatchSeconds(batch), eight.BatchSeconds(batch)
		if math.Abs(a/8-b) > 1e-12*a {
			t.Errorf("%v: %v s on one GPU, %v on eight", batch, a, b)
		}
	}
}

// TestRooflineBoundByMemoryThenCompute: one token is a memory-bound step (the weights' read: 141 GB
// at 3.35 TB/s, 42 ms for Llama-3.1-70B on one H100); 8,192 tokens are compute-bound.
func TestRooflineBoundByMemoryThenCompute(t *testing.T) {
	r := roofline(t, "llama-3.1-70b", "h100", 1)
	small, large := []Request{{1, 0}}, []Request{{8192, 0}}
	if s := r.BatchSeconds(small); s != r.MemorySeconds(small) || s < 0.040 || s > 0.044 {
		t.Errorf(
			"one token: %v s, memory %v, compute %v",
			s,
			r.MemorySeconds(small),
			r.ComputeSeconds(small),
		)
	}
	if s := r.BatchSeconds(large); s != r.ComputeSeconds(large) || s <= r.MemorySeconds(large) {
		t.Errorf(
			"8192 tokens: %v s, memory %v, compute %v",
			s,
			r.MemorySeconds(large),
			r.ComputeSeconds(large),
		)
	}
}

// FuzzRooflineAgainstPerTokenSum: the roofline's closed forms equal a deliberately simple count,
// token by token and key by key, for any request (the etcd quick-test model: an optimized function
// against a naive one).
func FuzzRooflineAgainstPerTokenSum(f *testing.F) {
	for _, seed := range [][3]int64{
		{1, 0, 0}, {7, 3, 1}, {300, 1000, 2}, {1, 4095, 3}, {64, 64, 1},
		{511, 1800, 6}, {1, 3000, 6}, {100, 4000, 6}, // glm-5.2: DSA's top-k reached and not
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	names := sizing.ModelNames()
	f.Fuzz(func(t *testing.T, newTokens, cachedTokens, model int64) {
		newTokens, cachedTokens = 1+abs(newTokens)%512, abs(cachedTokens)%4096
		r := roofline(t, names[abs(model)%int64(len(names))], "h100", 1)
		m := r.Model
		var naive, keysAll float64
		for i := int64(0); i < newTokens; i++ {
			// the token's linear layers
			naive += 2 * (float64(m.ActiveParams) - 2*float64(m.VocabSize)*float64(m.HiddenSize))
			// itself and everything before it, or DSA's top-k of them; a DSA indexer scores them all
			keys := cachedTokens + i + 1
			if m.DSA.TopK > 0 {
				naive += float64(int64(m.DSA.IndexerLayers)*keys) * 2 *
					float64(m.DSA.IndexHeads*m.DSA.IndexHeadDim)
				keys = min(keys, int64(m.DSA.TopK))
			}
			keysAll += float64(keys)
		}
		naive += 2 * float64(
			m.VocabSize,
		) * float64(
			m.HiddenSize,
		) // the output head, on the last token
		// attention: expanded (every key, plus each cached latent's expansion) or, for MLA,
		// absorbed over the latent, whichever is cheaper
		expand := float64(cachedTokens) * CachedExpandFLOPs(m)
		expanded := float64(m.Layers) * (keysAll*PairFLOPs(m) + expand)
		absorbed := expanded
		if m.Attention == sizing.MLA {
			pair := 2 * float64(m.Heads) * float64(2*m.MLA.KVLoraRank+m.MLA.QKRopeHeadDim)
			absorbed = float64(m.Layers) * keysAll * pair
		}
		naive += min(expanded, absorbed)
		got := r.FLOPs([]Request{{newTokens, cachedTokens}})
		if math.Abs(got-naive) > 1e-9*naive {
			t.Errorf(
				"%s new %d cached %d: %v FLOPs, the per-token sum %v",
				m.Name,
				newTokens,
				cachedTokens,
				got,
				naive,
			)
		}
	})
}

func abs(v int64) int64 {
	if v < 0 {
		if v == math.MinInt64 {
			return math.MaxInt64
		}
		return -v
	}
	return v
}
