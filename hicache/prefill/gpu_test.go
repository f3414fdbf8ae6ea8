package prefill

import (
	"math"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/sizing"
)

// datasheet is one GPU row's figures as its cited source prints them: sparse rates are halved
// here, per-platform totals divided by the platform's GPUs, so that a row typed wrong in gpu.go
// (or a source misread into it) fails.
type datasheet struct {
	name                string
	bf16, fp8, fp4      float64 // dense FLOP/s a GPU, from the printed figures
	hbmBytesPerSecond   float64
	hostBytesEachWay    float64
	hostLink, sourceHas string
}

// TestGPUTableMatchesDatasheets: every --gpu row's rates are its source's printed figures.
func TestGPUTableMatchesDatasheets(t *testing.T) {
	const tera, peta = 1e12, 1e15
	const sparse = 2   // "with sparsity" figures are twice the dense rate
	pcie5 := 128e9 / 2 // "PCIe Gen5 128 GB/s", both ways together
	sheets := []datasheet{
		// H20 product brief: FP16/BF16 148 TFLOPS, FP8 296 TFLOPS (dense), 4.0 TB/s.
		{"h20", 148 * tera, 296 * tera, 0, 4.0e12, pcie5, "PCIe Gen5 x16", "H20"},
		// aiconfigurator's h20_3e.yaml: 148 and 296 TFLOPS, mem_bw 4917GB/s, pcie_bw 64 GB/s.
		{"h20-3e", 148 * tera, 296 * tera, 0, 4917e9, 64e9, "PCIe Gen5 x16", "H20-3e"},
		// H100 SXM: BF16 1,979 TFLOPS*, FP8 3,958 TFLOPS* (* with sparsity), 3.35 TB/s.
		{"h100", 1979 * tera / sparse, 3958 * tera / sparse, 0, 3.35e12, pcie5, "PCIe Gen5 x16",
			"H100"},
		{"h800", 1979 * tera / sparse, 3958 * tera / sparse, 0, 3.35e12, pcie5, "PCIe Gen5 x16",
			"H800"},
		// H200 SXM: the same compute, 4.8 TB/s.
		{"h200", 1979 * tera / sparse, 3958 * tera / sparse, 0, 4.8e12, pcie5, "PCIe Gen5 x16",
			"H200"},
		// HGX B200, 8 GPUs: FP16/BF16 36 PFLOPS*, FP8 72 PFLOPS*, FP4 72 PFLOPS dense, 62 TB/s.
		{"b200", 36 * peta / 8 / sparse, 72 * peta / 8 / sparse, 72 * peta / 8, 7.7e12, pcie5,
			"PCIe Gen5 x16", "B200"},
		// GB200 NVL72, 72 GPUs: FP16/BF16 360 PFLOPS*, FP8 720*, FP4 1,440*, HBM 576 TB/s;
		// NVLink-C2C 900 GB/s bidirectional.
		{"gb200", 360 * peta / 72 / sparse, 720 * peta / 72 / sparse, 1440 * peta / 72 / sparse,
			576e12 / 72, 900e9 / 2, "NVLink-C2C", "GB200"},
		// Blackwell Ultra datasheet, HGX B300 per GPU: FP16/BF16 4.5 PFLOPS*, FP8 9*, FP4 14 dense;
		// 62 TB/s for 8 GPUs; PCIe Gen6 x16, 256 GB/s both ways together.
		{"b300", 4.5 * peta / sparse, 9 * peta / sparse, 14 * peta, 62e12 / 8, 256e9 / 2,
			"PCIe Gen6 x16", "B300"},
		// MI300X: FP16/BF16 1,307.4 TFLOPS and FP8 2,614.9 TFLOPS dense, 5.3 TB/s.
		{"mi300x", 1307.4 * tera, 2614.9 * tera, 0, 5.3e12, pcie5, "PCIe Gen5 x16", "MI300X"},
		// MI355X: 256 CUs x 2.4 GHz x 8,192 FP8 FLOPs a clock (5.0 PFLOPS), BF16 half, MXFP4
		// twice; 8 TB/s.
		{"mi355x", 256 * 2.4e9 * 8192 / 2, 256 * 2.4e9 * 8192, 256 * 2.4e9 * 8192 * 2, 8e12, pcie5,
			"PCIe Gen5 x16", "MI355X"},
	}
	if len(sheets) != len(gpus) {
		t.Errorf("%d datasheets for %d rows: every row is checked", len(sheets), len(gpus))
	}
	near := func(got, want float64) bool {
		return got == want || math.Abs(got-want) <= 1e-4*want
	}
	for _, d := range sheets {
		g, err := LookupGPU(d.name)
		if err != nil {
			t.Errorf("%s: %v", d.name, err)
			continue
		}
		if !near(g.Dense.BF16, d.bf16) || !near(g.Dense.FP8, d.fp8) || !near(g.Dense.FP4, d.fp4) ||
			!near(g.HBMBytesPerSecond, d.hbmBytesPerSecond) ||
			g.HostBytesPerSecond != d.hostBytesEachWay || g.HostLink != d.hostLink ||
			!strings.Contains(g.Source, d.sourceHas) {
			t.Errorf("%s: row %+v, its datasheet %+v", d.name, g, d)
		}
	}
}

// computeBound and memoryBound are a step of each kind for a 70B-class model on one group: 8,192
// new tokens (FLOPs over the weights' bytes far past any GPU's ridge point) and one token.
var computeBound, memoryBound = []Request{{NewTokens: 8192}}, []Request{{NewTokens: 1}}

// TestFP8FasterThanBF16WhenComputeBound: on every GPU, a compute-bound step in fp8 takes less time
// than in bf16, but not half (attention stays at the bf16 rate); on one with fp4, fp4 less again.
// A memory-bound step is faster in fp8 too, by the weights' bytes: fp8 halves them, so the step
// takes just over half (the KV's bytes do not shrink).
func TestFP8FasterThanBF16WhenComputeBound(t *testing.T) {
	for _, model := range []string{"llama-3.1-70b", "deepseek-v3"} {
		for _, gpu := range GPUNames() {
			bf16, fp8 := rooflineIn(t, model, gpu, 8, "bf16"), rooflineIn(t, model, gpu, 8, "fp8")
			b, f := bf16.BatchSeconds(computeBound), fp8.BatchSeconds(computeBound)
			if b != bf16.ComputeSeconds(computeBound) || f != fp8.ComputeSeconds(computeBound) {
				t.Errorf("%s on %s: 8,192 tokens is not compute-bound", model, gpu)
			}
			if !(f < b && f > b/2) {
				t.Errorf("%s on %s, compute-bound: fp8 %g s, bf16 %g s: want fp8 faster, "+
					"not twice", model, gpu, f, b)
			}
			mb, mf := bf16.BatchSeconds(memoryBound), fp8.BatchSeconds(memoryBound)
			if mb != bf16.MemorySeconds(memoryBound) || !(mf > mb/2 && mf < 0.51*mb) {
				t.Errorf("%s on %s, one token: fp8 %g s, bf16 %g s: want just over half",
					model, gpu, mf, mb)
			}
			if fp8.GPU.Dense.FP4 > 0 {
				fp4 := rooflineIn(t, model, gpu, 8, "fp4")
				if f4 := fp4.BatchSeconds(computeBound); !(f4 < f) {
					t.Errorf("%s on %s: fp4 %g s, fp8 %g s", model, gpu, f4, f)
				}
			}
		}
	}
}

// TestComputeSplitsLinearAndAttentionRates: the compute time is the linear FLOPs at the dtype's
// rate plus attention's at the bf16 rate, both at the efficiency, by hand for one step.
func TestComputeSplitsLinearAndAttentionRates(t *testing.T) {
	r := rooflineIn(t, "llama-3.1-8b", "b200", 2, "fp4")
	linear, attention := LinearFLOPs(r.Model, 1000), AttentionFLOPs(r.Model, 3000, 1000)
	want := linear/(2*9e15*DefaultEfficiency) + attention/(2*2.25e15*DefaultEfficiency)
	if got := r.ComputeSeconds([]Request{{1000, 3000}}); math.Abs(got-want) > 1e-12*want {
		t.Errorf("compute %v s, want %v", got, want)
	}
	memory := (8_030_261_248*0.5 + 4000*float64(r.Model.TokenBytes())) / (2 * 7.7e12)
	if got := r.MemorySeconds([]Request{{1000, 3000}}); math.Abs(got-memory) > 1e-12*memory {
		t.Errorf("memory %v s, want %v (half a byte a parameter)", got, memory)
	}
}

// TestPrefillDTypeDefaultsToTheServedPrecision: without --prefill-dtype the roofline runs each
// model in its served precision (DeepSeek-V3 and GLM-5.2 in fp8, the others in bf16), and the
// summary says so.
func TestPrefillDTypeDefaultsToTheServedPrecision(t *testing.T) {
	want := map[string]sizing.DType{
		"llama-3.1-8b": sizing.BF16, "llama-3.1-70b": sizing.BF16, "qwen2.5-72b": sizing.BF16,
		"deepseek-v3": sizing.FP8, "qwen3-32b": sizing.BF16, "qwen3-235b-a22b": sizing.BF16,
		"glm-5.2": sizing.FP8, "glm-4.5": sizing.BF16,
	}
	for _, name := range sizing.ModelNames() {
		r := roofline(t, name, "h200", 8)
		d, ok := want[name]
		if !ok || r.DType != d || r.Model.ServedSource == "" ||
			!strings.Contains(r.Describe(), " in "+d.String()+" (its served precision) ") {
			t.Errorf("%s: %v (source %q), want %v: %s", name, r.DType, r.Model.ServedSource, d,
				r.Describe())
		}
	}
	if r := rooflineIn(t, "deepseek-v3", "h200", 8, "BF16"); r.DType != sizing.BF16 ||
		strings.Contains(r.Describe(), "served") {
		t.Errorf("deepseek-v3 in bf16: %v, %s", r.DType, r.Describe())
	}
}

// TestPrefillDTypeRefusedWhereTheGPUHasNoRate: fp4 on an H100 is an invalid --prefill-dtype that
// names the GPUs with an fp4 rate; an unknown dtype names the choices; fp4 on a B200 is taken.
func TestPrefillDTypeRefusedWhereTheGPUHasNoRate(t *testing.T) {
	o := Options{Model: "deepseek-v3", GPU: "h100", GroupGPUs: 8, DType: "fp4", Efficiency: 0.5}
	if _, err := New(o); !isFlagError(err, "prefill-dtype") ||
		!strings.Contains(err.Error(), "h100 has no dense fp4 rate") ||
		!strings.Contains(err.Error(), "b200, gb200, b300, mi355x") {
		t.Errorf("fp4 on h100: %v", err)
	}
	o.DType = "int4"
	if _, err := New(o); !isFlagError(err, "prefill-dtype") ||
		!strings.Contains(err.Error(), "bf16, fp8, fp4") {
		t.Errorf("int4: %v", err)
	}
	o.DType, o.GPU = "fp4", "b200"
	if m, err := New(o); err != nil || m.(*Roofline).DType != sizing.FP4 {
		t.Errorf("fp4 on b200: %v %v", m, err)
	}
}
