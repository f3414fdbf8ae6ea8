package prefill

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/sizing"
)

// Attention's FLOPs, by the roofline's count (PREFILL.md, "The roofline" and "Hits"): causal
// query-key pairs, or DSA's top-k of them, each at its attention kind's cost, an MLA model's two
// paths, and a DSA model's indexer.

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
	d := m.MLA
	pair := 2 * float64(m.Heads) * float64(2*d.KVLoraRank+d.QKRopeHeadDim)
	return float64(m.Layers) * AttendedPairs(m, cachedTokens, newTokens) * pair
}

// AttentionFLOPs is causal attention's score and value products for newTokens tokens after
// cachedTokens: AttendedPairs query-key pairs in each layer, each costing PairFLOPs. An MLA model
// also expands each cached token's latent into every head's key and value (kv_b_proj),
// CachedExpandFLOPs per cached token per layer: the new tokens' expansion is in their linear
// FLOPs; the cached ones' are the price of caching a latent.
func AttentionFLOPs(m sizing.Model, cachedTokens, newTokens int64) float64 {
	if newTokens <= 0 {
		return 0
	}
	pairs := AttendedPairs(m, cachedTokens, newTokens)
	return float64(m.Layers) * (pairs*PairFLOPs(m) + float64(cachedTokens)*CachedExpandFLOPs(m))
}

// CausalPairs is causal attention's query-key pairs in one layer for newTokens tokens after
// cachedTokens: new token i (0-based) attends to cached + i + 1 keys, cached x new + new x (new +
// 1) / 2 in all.
func CausalPairs(cachedTokens, newTokens int64) float64 {
	if newTokens <= 0 {
		return 0
	}
	c, n := float64(cachedTokens), float64(newTokens)
	return c*n + n*(n+1)/2
}

// AttendedPairs is the query-key pairs attention computes in one layer: CausalPairs for dense
// attention; under DSA each query attends to at most TopK of its keys (the indexer's top scores;
// DeepSeek-V3.2-Exp's report, equation 2), so new token i attends to min(TopK, cached + i + 1).
func AttendedPairs(m sizing.Model, cachedTokens, newTokens int64) float64 {
	if !m.DSA.Sparse() || newTokens <= 0 {
		return CausalPairs(cachedTokens, newTokens)
	}
	k := int64(m.DSA.TopK)
	// the new tokens with at most k keys: those with cached + i + 1 <= k
	dense := min(max(k-cachedTokens, 0), newTokens)
	return CausalPairs(cachedTokens, dense) + float64(newTokens-dense)*float64(k)
}

// IndexerFLOPs is a DSA model's lightning indexer (DeepSeek-V3.2-Exp's report, equation 1): on each
// of its IndexerLayers it scores every causal key of every new token with IndexHeads heads of
// IndexHeadDim, 2 FLOPs a dimension (the q.k products; the ReLU and the heads' weighted sum are a
// few FLOPs a head, left out, and so is the top-k selection, which is no matrix multiply). It grows
// with the square of the context, as dense attention does, at a 32nd of GLM-5.2's dense pair
// (2 x 32 x 128 = 8,192 FLOPs against 65,536) on 21 of its 78 layers, and in fp8
// (Roofline.ComputeSeconds). 0 for a dense model. The indexer's own projections (its query, key
// and head weights) are in the model's parameters, and so in LinearFLOPs.
func IndexerFLOPs(m sizing.Model, cachedTokens, newTokens int64) float64 {
	if !m.DSA.Sparse() {
		return 0
	}
	d := m.DSA
	pair := 2 * float64(d.IndexHeads) * float64(d.IndexHeadDim)
	return float64(d.IndexerLayers) * CausalPairs(cachedTokens, newTokens) * pair
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
