package prefill

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// Request is one request's share of a prefill batch: the tokens it computes, after the prefix whose
// KV it already has (in L1, or loaded back from the L2 or the L3). Both are counts of tokens, >= 0.
type Request struct{ NewTokens, CachedTokens int64 }

// Model is a prefill cost model: the seconds a GPU group takes to prefill a batch (one forward pass
// over every request's new tokens, attending to its cached prefix). It is a pure function of the
// batch.
type Model interface {
	BatchSeconds(reqs []Request) float64
	// RecomputeSeconds is what prefilling a prefix of prefixTokens from nothing adds to a busy
	// step: the time a tier's load must beat (BreakEvenBytesPerSecond).
	RecomputeSeconds(prefixTokens int64) float64
	// Describe names the model and its parameters, for the summary ("roofline: ...", "profile:
	// ...").
	Describe() string
}

// DefaultEfficiency is --prefill-efficiency's default: the share of each dense tensor-core peak
// that prefill's FLOPs run at (model FLOPs utilisation), the linear layers' of the deployment's
// precision and attention's of bf16 (Roofline.ComputeSeconds). 0.5 sits below what the kernels
// reach alone: FlashAttention-3 runs attention's forward pass at up to 75% of H100's bf16 peak
// (Shah et al. 2024, arXiv 2407.08608) and large GEMMs at 70-80% (alibaba/InferSim's measured FP8
// GEMMs on H800 at 16,384 rows: 0.38 to 0.73), an upper bound that norms, rope, MoE routing and the
// tensor- and expert-parallel collectives of a real step pull down. Other roofline simulators
// default near it: inference-sim's roofline takes 0.45 on H100, InferSim 0.35 to 0.6 by GPU.
// PREFILL.md sets the published serving figures beside it. One number for every shape is the
// model's largest simplification.
const DefaultEfficiency = 0.5

// MaxEfficiency bounds --prefill-efficiency. Above 1 the roofline runs faster than the datasheet's
// peak, which no kernel does, but a fitted factor may: inference-sim's trained roofline multiplies
// its prefill compute time at the dense peak by 0.116 to 0.152 (1/0.116 = 8.6 here; PREFILL.md,
// "The efficiency"). Such a factor B is written 1/B, and only so: a plain value is a share of the
// peak, in (0, 1] (ParseEfficiency), since a plain 50 is 50% mistyped, not a fit. 100 (B = 0.01)
// is more than ten times the largest equivalent we know of.
const MaxEfficiency = 100

// MinFittedFactor is the smallest B that --prefill-efficiency 1/B takes: 1/MaxEfficiency.
const MinFittedFactor = 1.0 / MaxEfficiency

// Roofline is the roofline prefill model of one model on a group of GPUs: a step takes the longer
// of its FLOPs at Efficiency of the group's peaks and its HBM bytes at the group's HBM rate.
type Roofline struct {
	Model     sizing.Model
	GPU       GPU
	GroupGPUs int // the group's GPUs (the CP size): they divide the FLOPs and the bytes evenly
	// DType is the deployment's precision: its linear layers run at the GPU's dense rate for it
	// and its weights take its bytes (attention runs in bf16 whatever it is).
	DType sizing.DType
	// Efficiency is the share of each dense peak the FLOPs reach, in (0, MaxEfficiency];
	// EfficiencyText is the value as the user gave it, printed as given.
	Efficiency     float64
	EfficiencyText string
}

// NewRoofline builds the roofline for a --model on a --gpu in the model's served precision, over
// the group's GPUs at an efficiency (New takes every option); each error is a
// *errscope.ConfigError naming its flag.
func NewRoofline(modelName, gpuName string, groupGPUs int, efficiency float64) (*Roofline, error) {
	return newRoofline(Options{
		Model:      modelName,
		GPU:        gpuName,
		GroupGPUs:  groupGPUs,
		Efficiency: efficiency,
	})
}

func newRoofline(o Options) (*Roofline, error) {
	m, err := sizing.LookupModel(o.Model)
	if err != nil {
		return nil, err
	}
	g, err := LookupGPU(o.GPU)
	if err != nil {
		return nil, err
	}
	d, err := DTypeFor(m, o.DType)
	if err != nil {
		return nil, err
	}
	if err := CheckDType(g, d); err != nil {
		return nil, err
	}
	if err := CheckEfficiency(o.Efficiency); err != nil {
		return nil, err
	}
	if o.GroupGPUs < 1 {
		return nil, &errscope.ConfigError{
			Flag:   "cp",
			Reason: fmt.Sprintf("a prefill group of %d GPUs", o.GroupGPUs),
		}
	}
	text := o.EfficiencyText
	if text == "" {
		text = strconv.FormatFloat(o.Efficiency, 'g', -1, 64)
	}
	return &Roofline{
		Model:          m,
		GPU:            g,
		GroupGPUs:      o.GroupGPUs,
		DType:          d,
		Efficiency:     o.Efficiency,
		EfficiencyText: text,
	}, nil
}

// DTypeFor is the precision a --prefill-dtype of name gives model m: m's own served precision when
// name is "" (its default), else the named one; the error names --prefill-dtype.
func DTypeFor(m sizing.Model, name string) (sizing.DType, error) {
	if name == "" {
		return m.Served, nil
	}
	return sizing.ParseDType("prefill-dtype", name)
}

// CheckEfficiency refuses a --prefill-efficiency outside (0, MaxEfficiency].
func CheckEfficiency(efficiency float64) error {
	if !(efficiency > 0 && efficiency <= MaxEfficiency) {
		return &errscope.ConfigError{
			Flag: "prefill-efficiency",
			Reason: fmt.Sprintf(
				"%v is not in (0, %d]: a share of the GPU's dense peaks, in (0, 1] (0.5), or "+
					"a fitted factor's equivalent (1/0.116 for a compute-time multiplier of 0.116)",
				efficiency,
				MaxEfficiency,
			),
		}
	}
	return nil
}

// ParseEfficiency reads a --prefill-efficiency: a share E of the dense peaks, in (0, 1] (0.5), or
// 1/B for a fitted factor B that multiplies the compute time at the dense peak (inference-sim's
// trained beta_1a: 1/0.116 is an efficiency of 8.6), B at least MinFittedFactor. A plain value
// above 1 is refused, whatever MaxEfficiency allows 1/B: 50 is 50% mistyped (the roofline at 50
// times the datasheet's peak), and a fitted factor is said as one. The value is checked
// (CheckEfficiency).
func ParseEfficiency(s string) (float64, error) {
	text := strings.TrimSpace(s)
	divisor, inverse := strings.CutPrefix(text, "1/")
	if inverse {
		text = divisor
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || (inverse && !(v > 0)) {
		return 0, &errscope.ConfigError{
			Flag: "prefill-efficiency",
			Reason: fmt.Sprintf(
				"%q is not a number (0.5) or 1/B for a fitted compute-time factor B (1/0.116)",
				s,
			),
		}
	}
	switch {
	case inverse && v < MinFittedFactor:
		return 0, &errscope.ConfigError{
			Flag: "prefill-efficiency",
			Reason: fmt.Sprintf(
				"%q: a fitted compute-time factor B in 1/B must be at least %g (an efficiency "+
					"of %d); inference-sim's are 0.116 to 0.152",
				s,
				MinFittedFactor,
				MaxEfficiency,
			),
		}
	case !inverse && v > 1:
		return 0, &errscope.ConfigError{
			Flag: "prefill-efficiency",
			Reason: fmt.Sprintf(
				"%q is above 1: a plain value is a share of the GPU's dense peaks, in (0, 1] "+
					"(0.5 for 50%%); if it is a fitted factor B that multiplies compute time at "+
					"the peak, write 1/B (1/0.116 for inference-sim's 0.116), B at least %g",
				s,
				MinFittedFactor,
			),
		}
	}
	if inverse {
		v = 1 / v
	}
	return v, CheckEfficiency(v)
}

// BatchSeconds is the roofline: max(compute, memory). Compute and memory overlap within a step (the
// GPU streams weights while its tensor cores work), so the longer one is the step.
func (r *Roofline) BatchSeconds(reqs []Request) float64 {
	if totalNew(reqs) == 0 {
		return 0
	}
	return math.Max(r.ComputeSeconds(reqs), r.MemorySeconds(reqs))
}

// RecomputeSeconds is the prefix's compute time alone: prefill steps are compute-bound once a batch
// holds a few hundred tokens, and the step reads its weights whether or not it recomputes the
// prefix, so the prefix adds its FLOPs and nothing of the weights' bytes. (BatchSeconds of the
// prefix as a lone request would charge it the weights' reads: a step's fixed cost, 50 ms for
// DeepSeek-V3 on 8 H800s, which would make a short prefix look dearer to recompute than it is in a
// batch.)
func (r *Roofline) RecomputeSeconds(prefixTokens int64) float64 {
	return r.ComputeSeconds([]Request{{NewTokens: prefixTokens}})
}

// ComputeSeconds is the batch's FLOPs at Efficiency of the group's dense peaks: its linear layers'
// at the rate of the deployment's precision, its attention's at the bf16 rate (attention runs in
// bf16 in the FP8 deployments we know of: DeepSeek-V3 keeps "attention operators" in BF16, arXiv
// 2412.19437, section 3.3.1, and serves "core MLA computations" in BF16, its inference system
// overview; PREFILL.md, "Precision").
//
// A DSA model's indexer runs at the fp8 rate: DeepSeek-V3.2-Exp's report says its lightning indexer
// "can be implemented in FP8", and SGLang's quantizes the indexer's queries and keys to FP8 before
// scoring them (IndexerFLOPs).
func (r *Roofline) ComputeSeconds(reqs []Request) float64 {
	f := r.flopsByKind(reqs)
	group := float64(r.GroupGPUs) * r.Efficiency
	seconds := f.linear/(group*r.GPU.Dense.Of(r.DType)) + f.attention/(group*r.GPU.Dense.BF16)
	if f.indexer > 0 {
		seconds += f.indexer / (group * r.indexerRate())
	}
	return seconds
}

// indexerRate is the dense rate a DSA indexer's scores run at: fp8's, or bf16's on a part without
// one.
func (r *Roofline) indexerRate() float64 {
	if fp8 := r.GPU.Dense.FP8; fp8 > 0 {
		return fp8
	}
	return r.GPU.Dense.BF16
}

// MemorySeconds is the batch's HBM bytes at the group's HBM rate. The weights are read once a step,
// whatever the batch (a large batch touches every expert of an MoE model, so all of Params); each
// request's KV is read or written once, the cached prefix's and the new tokens' (attention's lower
// bound: a fused kernel such as FlashAttention streams K and V once per query block, which this
// counts once). The weights take the deployment's precision's bytes (2 for bf16, 1 for fp8, 0.5 for
// fp4); the KV stays in bf16 (sizing.Model). Activations are left out: a fused prefill keeps them
// in on-chip memory or reads them a few times per layer, small beside the weights. The group's GPUs
// share the weights (tensor or expert parallel inside the group), so each reads its share.
func (r *Roofline) MemorySeconds(reqs []Request) float64 {
	if totalNew(reqs) == 0 {
		return 0
	}
	bytes := float64(r.Model.Params) * r.DType.WeightBytes()
	for _, q := range reqs {
		if q.NewTokens > 0 {
			bytes += float64(q.CachedTokens+q.NewTokens) * float64(r.Model.TokenBytes())
		}
	}
	return bytes / (float64(r.GroupGPUs) * r.GPU.HBMBytesPerSecond)
}

// FLOPs counts a batch's prefill FLOPs: for each request, LinearFLOPs + AttentionFLOPs (+
// IndexerFLOPs for a DSA model), the attention of an MLA model's batch taken by the cheaper of its
// two paths for the whole step (AbsorbedAttentionFLOPs), as an engine picks one kernel for a step.
func (r *Roofline) FLOPs(reqs []Request) float64 {
	f := r.flopsByKind(reqs)
	return f.linear + f.attention + f.indexer
}

// kindFLOPs are a batch's FLOPs by the rate they run at: the linear layers' (the deployment's
// precision), attention's (the cheaper path's, bf16) and a DSA indexer's (fp8).
type kindFLOPs struct{ linear, attention, indexer float64 }

// flopsByKind is FLOPs in its parts.
func (r *Roofline) flopsByKind(reqs []Request) kindFLOPs {
	var f kindFLOPs
	var expanded, absorbed float64
	for _, q := range reqs {
		if q.NewTokens > 0 {
			f.linear += LinearFLOPs(r.Model, q.NewTokens)
			f.indexer += IndexerFLOPs(r.Model, q.CachedTokens, q.NewTokens)
			expanded += AttentionFLOPs(r.Model, q.CachedTokens, q.NewTokens)
			absorbed += AbsorbedAttentionFLOPs(r.Model, q.CachedTokens, q.NewTokens)
		}
	}
	f.attention = min(expanded, absorbed)
	return f
}

// LinearFLOPs is the matrix multiplies of newTokens tokens through the weights: 2 FLOPs (a multiply
// and an add) per active parameter per token, less the embedding table (a lookup, no FLOPs) and the
// output head, which a prefill applies to the request's last token only (its first output token).
func LinearFLOPs(m sizing.Model, newTokens int64) float64 {
	if newTokens <= 0 {
		return 0
	}
	embedding := float64(m.VocabSize) * float64(m.HiddenSize)
	return 2*(float64(m.ActiveParams)-2*embedding)*float64(newTokens) + 2*embedding
}

// Describe names the roofline's inputs, for the summary: the model and its precision (and
// whether it is the model's own), the GPUs and the rates the step runs at, and the efficiency as
// the user gave it.
func (r *Roofline) Describe() string {
	precision := r.DType.String()
	if r.DType == r.Model.Served {
		precision += " (its served precision)"
	}
	rates := fmt.Sprintf("%s TFLOP/s %s linear layers", teraFLOPs(r.GPU.Dense.Of(r.DType)), r.DType)
	if r.DType != sizing.BF16 {
		rates += fmt.Sprintf(", %s TFLOP/s bf16 attention", teraFLOPs(r.GPU.Dense.BF16))
	} else {
		rates += " and attention"
	}
	efficiency := r.EfficiencyText
	if strings.Contains(efficiency, "/") {
		efficiency += " = " + strconv.FormatFloat(r.Efficiency, 'g', 4, 64)
	}
	if r.Efficiency > 1 {
		efficiency += " (above 1: a fitted factor, faster than the dense peak; not a utilisation)"
	}
	return fmt.Sprintf(
		"roofline: %s in %s on %d x %s (dense %s; %s TB/s HBM each), efficiency %s",
		r.Model.Name,
		precision,
		r.GroupGPUs,
		r.GPU.Name,
		rates,
		strconv.FormatFloat(r.GPU.HBMBytesPerSecond/1e12, 'g', 4, 64),
		efficiency,
	)
}

// teraFLOPs prints a rate in TFLOP/s to 5 significant digits, as the datasheets print them (989.5,
// 2614.9).
func teraFLOPs(flopsPerSecond float64) string {
	return strconv.FormatFloat(flopsPerSecond/1e12, 'g', 5, 64)
}

func totalNew(reqs []Request) int64 {
	var n int64
	for _, q := range reqs {
		n += max(q.NewTokens, 0)
	}
	return n
}
