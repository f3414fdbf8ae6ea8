package prefill

import (
	"fmt"
	"math"

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

// DefaultEfficiency is --prefill-efficiency's default: the share of the group's dense bf16 peak
// that prefill's FLOPs run at (model FLOPs utilisation). 0.5 sits below what the kernels reach
// alone: FlashAttention-3 runs attention's forward pass at up to 75% of H100's bf16 peak (Shah et
// al. 2024, arXiv 2407.08608) and large GEMMs at 70-80%, an upper bound that norms, rope, MoE
// routing and the tensor- and expert-parallel collectives of a real step pull down. The published
// serving figures in PREFILL.md imply 0.37 to 0.44 of bf16 peak; 0.5 stays optimistic on purpose,
// since a prefill too cheap understates what the cache saves rather than overstating it. One number
// for every shape is the model's largest simplification.
const DefaultEfficiency = 0.5

// weightBytesPerParam: the roofline reads weights in bf16, as it computes in bf16 (an FP8
// deployment reads and computes at twice the rate: PREFILL.md, "Limits").
const weightBytesPerParam = 2

// Roofline is the roofline prefill model of one model on a group of GPUs: a step takes the longer
// of its FLOPs at Efficiency of the group's peak and its HBM bytes at the group's HBM rate.
type Roofline struct {
	Model      sizing.Model
	GPU        GPU
	GroupGPUs  int     // the group's GPUs (the CP size): they divide the FLOPs and the bytes evenly
	Efficiency float64 // model FLOPs utilisation, (0, 1]
}

// NewRoofline builds the roofline for a --model, a --gpu, the group's GPUs and
// --prefill-efficiency; each error is a *errscope.ConfigError naming its flag.
func NewRoofline(modelName, gpuName string, groupGPUs int, efficiency float64) (*Roofline, error) {
	m, err := sizing.LookupModel(modelName)
	if err != nil {
		return nil, err
	}
	g, err := LookupGPU(gpuName)
	if err != nil {
		return nil, err
	}
	if err := CheckEfficiency(efficiency); err != nil {
		return nil, err
	}
	if groupGPUs < 1 {
		return nil, &errscope.ConfigError{
			Flag:   "cp",
			Reason: fmt.Sprintf("a prefill group of %d GPUs", groupGPUs),
		}
	}
	return &Roofline{Model: m, GPU: g, GroupGPUs: groupGPUs, Efficiency: efficiency}, nil
}

// CheckEfficiency refuses a --prefill-efficiency outside (0, 1].
func CheckEfficiency(efficiency float64) error {
	if !(efficiency > 0 && efficiency <= 1) {
		return &errscope.ConfigError{
			Flag: "prefill-efficiency",
			Reason: fmt.Sprintf(
				"%v is not in (0, 1] (a share of the GPU's dense bf16 peak)",
				efficiency,
			),
		}
	}
	return nil
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

// ComputeSeconds is the batch's FLOPs at Efficiency of the group's dense peak.
func (r *Roofline) ComputeSeconds(reqs []Request) float64 {
	return r.FLOPs(reqs) / (float64(r.GroupGPUs) * r.GPU.DenseBF16FLOPsPerSecond * r.Efficiency)
}

// MemorySeconds is the batch's HBM bytes at the group's HBM rate. The weights are read once a step,
// whatever the batch (a large batch touches every expert of an MoE model, so all of Params); each
// request's KV is read or written once, the cached prefix's and the new tokens' (attention's lower
// bound: a fused kernel such as FlashAttention streams K and V once per query block, which this
// counts once). Activations are left out: a fused prefill keeps them in on-chip memory or reads
// them a few times per layer, small beside the weights. The group's GPUs share the weights (tensor
// or expert parallel inside the group), so each reads its share.
func (r *Roofline) MemorySeconds(reqs []Request) float64 {
	if totalNew(reqs) == 0 {
		return 0
	}
	bytes := float64(r.Model.Params) * weightBytesPerParam
	for _, q := range reqs {
		if q.NewTokens > 0 {
			bytes += float64(q.CachedTokens+q.NewTokens) * float64(r.Model.TokenBytes())
		}
	}
	return bytes / (float64(r.GroupGPUs) * r.GPU.HBMBytesPerSecond)
}

// FLOPs counts a batch's prefill FLOPs: for each request, LinearFLOPs + AttentionFLOPs, the
// attention of an MLA model's batch taken by the cheaper of its two paths for the whole step
// (AbsorbedAttentionFLOPs), as an engine picks one kernel for a step.
func (r *Roofline) FLOPs(reqs []Request) float64 {
	var linear, expanded, absorbed float64
	for _, q := range reqs {
		if q.NewTokens > 0 {
			linear += LinearFLOPs(r.Model, q.NewTokens)
			expanded += AttentionFLOPs(r.Model, q.CachedTokens, q.NewTokens)
			absorbed += AbsorbedAttentionFLOPs(r.Model, q.CachedTokens, q.NewTokens)
		}
	}
	return linear + min(expanded, absorbed)
}

// AbsorbedAttentionFLOPs is MLA's absorbed path (DeepSeek-V2, arXiv 2405.04434, section 2.1.2: W_UK
// folds into the query and W_UV into the output): every head attends over the cached latent itself,
// so no cached token is expanded, but a query-key pair costs 2 x heads x (kv_lora_rank + qk_rope)
// for the score and 2 x heads x kv_lora_rank for the value. Folding W_UK and W_UV into the new
// tokens' query and output costs what their kv_b_proj costs, already in LinearFLOPs. Cheaper than
// expansion when new tokens are few (DeepSeek-V3 on 128 heads: below about 170). A GQA model has
// one path: AttentionFLOPs.
func AbsorbedAttentionFLOPs(m sizing.Model, cachedTokens, newTokens int64) float64 {
	if m.Attention != sizing.MLA {
		return AttentionFLOPs(m, cachedTokens, newTokens)
	}
	if newTokens <= 0 {
		return 0
	}
	c, n := float64(cachedTokens), float64(newTokens)
	pairs := c*n + n*(n+1)/2
	d := m.MLA
	pair := 2 * float64(m.Heads) * float64(2*d.KVLoraRank+d.QKRopeHeadDim)
	return float64(m.Layers) * pairs * pair
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

// AttentionFLOPs is causal attention's score and value products for newTokens tokens after
// cachedTokens: new token i (0-based) attends to cached + i + 1 keys, so a request has cached x new
// + new x (new + 1) / 2 query-key pairs in each layer, each costing PairFLOPs. An MLA model also
// expands each cached token's latent into every head's key and value (kv_b_proj), CachedExpandFLOPs
// per cached token per layer: the new tokens' expansion is in their linear FLOPs; the cached ones'
// are the price of caching a latent.
func AttentionFLOPs(m sizing.Model, cachedTokens, newTokens int64) float64 {
	if newTokens <= 0 {
		return 0
	}
	c, n := float64(cachedTokens), float64(newTokens)
	pairs := c*n + n*(n+1)/2
	return float64(m.Layers) * (pairs*PairFLOPs(m) + c*CachedExpandFLOPs(m))
}

// PairFLOPs is one query-key pair's attention FLOPs in one layer, every head: the score q.k and the
// weighted value p.v, each 2 FLOPs per dimension. GQA: 2 x heads x head_dim each (the KV heads'
// sharing saves bytes, not FLOPs). MLA as prefill runs it (keys and values expanded, not absorbed):
// 2 x heads x (qk_nope + qk_rope) for the score and 2 x heads x v_head_dim for the value.
func PairFLOPs(m sizing.Model) float64 {
	switch m.Attention {
	case sizing.GQA:
		return 4 * float64(m.Heads) * float64(m.HeadDim)
	case sizing.MLA:
		d := m.MLA
		return 2 * float64(m.Heads) * float64(d.QKNopeHeadDim+d.QKRopeHeadDim+d.VHeadDim)
	}
	panic(fmt.Sprintf("prefill: model %s has no attention kind", m.Name))
}

// CachedExpandFLOPs is an MLA model's cost of expanding one cached token's latent in one layer:
// kv_b_proj, kv_lora_rank -> heads x (qk_nope + v_head_dim), 2 FLOPs per weight. A GQA model caches
// K and V as they are used: 0.
func CachedExpandFLOPs(m sizing.Model) float64 {
	if m.Attention != sizing.MLA {
		return 0
	}
	d := m.MLA
	return 2 * float64(d.KVLoraRank) * float64(m.Heads) * float64(d.QKNopeHeadDim+d.VHeadDim)
}

// Describe names the roofline's inputs, for the summary.
func (r *Roofline) Describe() string {
	return fmt.Sprintf(
		"roofline: %s on %d x %s (%.0f TFLOP/s bf16 dense, %.2f TB/s HBM each), efficiency %.2f",
		r.Model.Name,
		r.GroupGPUs,
		r.GPU.Name,
		r.GPU.DenseBF16FLOPsPerSecond/1e12,
		r.GPU.HBMBytesPerSecond/1e12,
		r.Efficiency,
	)
}

func totalNew(reqs []Request) int64 {
	var n int64
	for _, q := range reqs {
		n += max(q.NewTokens, 0)
	}
	return n
}
