package sizing

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
)

// Real models' KV geometry (--model), in bf16 (2 bytes per element).
//
// How a model maps to the geometry flags. The program's geometry gives every rank of a CP group a
// part of every page: a slot holds one page of --page-tokens tokens for every (rank, layer,
// payload), and --token-bytes is the bytes of one token in one rank's part of one layer and
// payload. In a CP group a sequence's tokens are split over the ranks (each rank holds the KV of
// its chunk, all heads, all layers), so over a page's worth of tokens each rank holds 1/cp of the
// page's KV. The program models that split as a page whose every token is shared by the cp ranks: a
// rank's part of a token is the model's per-layer-per-payload bytes divided by cp, rounded up to
// the 8-byte multiple the copy kernels need. So
//
//	--layers      = the model's layers
//	--payloads    = 2 (K and V) for a GQA model, 1 (the latent) for an MLA model
//	--token-bytes = ceil8(LayerTokenBytes / cp)
//
// and one slot holds cp x token-bytes x layers x payloads x page-tokens bytes, which is page-tokens
// x the model's KV bytes per token when cp divides LayerTokenBytes / 8: the L2's capacity in
// tokens, and so its hit rate, does not depend on the CP size, as in a real CP group whose host
// cache holds each token's KV once. Dividing by cp (rather than giving each rank a whole token) is
// what keeps a byte budget from counting each token cp times.
type Model struct {
	Name     string
	Layers   int
	Payloads int // 2 = K and V, 1 = an MLA latent
	// LayerTokenBytes: one token's KV in one layer and payload, whole (every CP rank's share
	// together): kv_heads x head_dim x 2 bytes for a GQA model, the latent's dimensions x 2 bytes
	// for MLA.
	LayerTokenBytes int
	Shape           string // where LayerTokenBytes comes from, for --help and the summary

	// What the prefill roofline (hicache/prefill) counts, from the same config.json (and the model
	// card for the parameter counts). Params is every weight, which a step reads from HBM;
	// ActiveParams the weights one token's forward pass multiplies (Params for a dense model; the
	// shared and the routed experts it is sent to for an MoE one). The embedding table and the
	// output head are each VocabSize x HiddenSize: none of these models ties them.
	Params, ActiveParams int64
	HiddenSize           int // hidden_size
	VocabSize            int // vocab_size
	// intermediate_size of a dense MLP (0 for an MoE model: its parameters are counted whole)
	Intermediate int
	Heads        int // num_attention_heads: the query heads
	Attention    Attention
	// GQA: KVHeads (num_key_value_heads) share each key and value head of HeadDim among Heads /
	// KVHeads queries.
	KVHeads, HeadDim int
	// MLA: each head's query and key are QKNopeHeadDim + QKRopeHeadDim wide and its value VHeadDim;
	// the cache holds a KVLoraRank latent (and the rope key) that kv_b_proj expands into every
	// head's key and value.
	MLA MLADims
	// DSA is DeepSeek sparse attention's dimensions (GLM-5.2; zero for dense attention): each query
	// attends to at most TopK keys, which a lightning indexer picks by scoring every key before it.
	DSA DSADims

	// Served is the precision the model is published and served in: its weights' bytes and the
	// rate its linear layers run at, --prefill-dtype's default (hicache/prefill). ServedSource
	// says where it comes from.
	Served       DType
	ServedSource string
}

// Attention is a model's attention kind: it decides what the KV cache holds and what attention
// costs.
type Attention int

const (
	GQA Attention = iota + 1 // grouped-query attention: K and V of KVHeads heads cached per layer
	// multi-head latent attention (DeepSeek-V2/V3): one compressed latent cached per layer
	MLA
)

func (a Attention) String() string {
	switch a {
	case GQA:
		return "GQA"
	case MLA:
		return "MLA"
	}
	return fmt.Sprintf("Attention(%d)", int(a))
}

// MLADims are an MLA model's head dimensions (config.json's names, in CamelCase).
type MLADims struct{ QKNopeHeadDim, QKRopeHeadDim, VHeadDim, KVLoraRank int }

// DSADims are DeepSeek sparse attention's dimensions (DeepSeek-V3.2-Exp's report, section 1,
// "Prototype of DSA": a lightning indexer scores every preceding key, I(t, s) = sum over its heads
// of w(t, j) ReLU(q(t, j) . k(s)), and each query attends to the keys of its TopK scores only),
// from config.json: index_topk (TopK), index_n_heads (IndexHeads), index_head_dim (IndexHeadDim)
// and the layers whose indexer_types entry is "full" (IndexerLayers: the others reuse the indices
// of the full layer before them). TopK 0 is dense attention.
type DSADims struct{ TopK, IndexHeads, IndexHeadDim, IndexerLayers int }

// Sparse says whether the model's attention is DSA's: each query over at most TopK keys.
func (d DSADims) Sparse() bool { return d.TopK > 0 }

// bf16Bytes is the size of one KV element: the models below serve their KV cache in bf16.
const bf16Bytes = 2

// models is the table --model reads, from each model's config.json (num_hidden_layers,
// num_key_value_heads, head_dim or hidden_size / num_attention_heads; DeepSeek-V3's kv_lora_rank
// 512 + qk_rope_head_dim 64).
//
// The architecture's fields, each from config.json on Hugging Face (meta-llama/Llama-3.1-8B and
// -70B, Qwen/Qwen2.5-72B, deepseek-ai/DeepSeek-V3; tie_word_embeddings false in all four; the
// Qwen3 and GLM-5.2 rows cite theirs beside them).
// Parameter counts: the dense models' are their safetensors' totals, which
// TestModelParamsFromConfig recomputes from the fields below within 0.1%; DeepSeek-V3's 671B total
// and 37B activated a token are its technical report's (arXiv 2412.19437, section 1; the 14B of its
// multi-token-prediction module, which serving skips, are not counted).
var models = []Model{
	{
		Name:            "llama-3.1-8b",
		Layers:          32,
		Payloads:        2,
		LayerTokenBytes: 8 * 128 * bf16Bytes,
		Shape:           "8 KV heads x head_dim 128",
		// hidden_size 4096, intermediate_size 14336, num_attention_heads 32, num_key_value_heads 8,
		// head_dim 128, vocab_size 128256
		Params:       8_030_261_248,
		ActiveParams: 8_030_261_248,
		HiddenSize:   4096,
		VocabSize:    128256,
		Intermediate: 14336,
		Heads:        32,
		Attention:    GQA,
		KVHeads:      8,
		HeadDim:      128,
		Served:       BF16,
		ServedSource: "config.json torch_dtype bfloat16 (Meta ships FP8 for the 405B only)",
	},
	{
		Name:            "llama-3.1-70b",
		Layers:          80,
		Payloads:        2,
		LayerTokenBytes: 8 * 128 * bf16Bytes,
		Shape:           "8 KV heads x head_dim 128",
		// hidden_size 8192, intermediate_size 28672, num_attention_heads 64, num_key_value_heads 8,
		// head_dim 128, vocab_size 128256
		Params:       70_553_706_496,
		ActiveParams: 70_553_706_496,
		HiddenSize:   8192,
		VocabSize:    128256,
		Intermediate: 28672,
		Heads:        64,
		Attention:    GQA,
		KVHeads:      8,
		HeadDim:      128,
		Served:       BF16,
		ServedSource: "config.json torch_dtype bfloat16 (Meta ships FP8 for the 405B only)",
	},
	{
		Name:            "qwen2.5-72b",
		Layers:          80,
		Payloads:        2,
		LayerTokenBytes: 8 * 128 * bf16Bytes,
		Shape:           "8 KV heads x head_dim 128",
		// hidden_size 8192, intermediate_size 29568, num_attention_heads 64, num_key_value_heads 8,
		// (head_dim 8192/64 = 128), vocab_size 152064; its q, k and v projections carry biases
		Params:       72_706_203_648,
		ActiveParams: 72_706_203_648,
		HiddenSize:   8192,
		VocabSize:    152064,
		Intermediate: 29568,
		Heads:        64,
		Attention:    GQA,
		KVHeads:      8,
		HeadDim:      128,
		Served:       BF16,
		ServedSource: "config.json torch_dtype bfloat16",
	},
	{
		Name:            "deepseek-v3",
		Layers:          61,
		Payloads:        1,
		LayerTokenBytes: (512 + 64) * bf16Bytes,
		Shape:           "MLA latent 512 + rope 64",
		// hidden_size 7168, num_attention_heads 128, qk_nope_head_dim 128, qk_rope_head_dim 64,
		// v_head_dim 128, kv_lora_rank 512, vocab_size 129280; 3 dense layers then 58 MoE layers of
		// 256 routed experts, 8 routed + 1 shared a token
		Params:       671_000_000_000,
		ActiveParams: 37_000_000_000,
		HiddenSize:   7168,
		VocabSize:    129280,
		Heads:        128,
		Attention:    MLA,
		MLA: MLADims{
			QKNopeHeadDim: 128,
			QKRopeHeadDim: 64,
			VHeadDim:      128,
			KVLoraRank:    512,
		},
		Served:       FP8,
		ServedSource: "README: \"we only provide FP8 weights\" (e4m3, 128 x 128 blocks)",
	},
	// https://huggingface.co/Qwen/Qwen3-32B/blob/main/config.json: 64 layers, hidden_size 5120,
	// intermediate_size 25600, num_attention_heads 64, num_key_value_heads 8, head_dim 128 (so q is
	// 8192 wide, wider than the hidden size), vocab_size 151936, tie_word_embeddings false; q_norm
	// and k_norm of head_dim each layer. Params recomputed from these (TestModelParamsFromConfig);
	// the model card (https://huggingface.co/Qwen/Qwen3-32B) says 32.8B, 31.2B non-embedding.
	{
		Name:            "qwen3-32b",
		Layers:          64,
		Payloads:        2,
		LayerTokenBytes: 8 * 128 * bf16Bytes,
		Shape:           "8 KV heads x head_dim 128",
		Params:          32_762_123_264,
		ActiveParams:    32_762_123_264,
		HiddenSize:      5120,
		VocabSize:       151936,
		Intermediate:    25600,
		Heads:           64,
		Attention:       GQA,
		KVHeads:         8,
		HeadDim:         128,
		Served:          BF16,
		ServedSource:    "config.json torch_dtype bfloat16 (Qwen3-32B-FP8 is a separate release)",
	},
	// https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json: 94 layers, every one MoE
	// (decoder_sparse_step 1, mlp_only_layers []), hidden_size 4096, num_attention_heads 64,
	// num_key_value_heads 4, head_dim 128, num_experts 128, num_experts_per_tok 8, no shared
	// expert, moe_intermediate_size 1536, vocab_size 151936, tie_word_embeddings false. Params
	// and ActiveParams recomputed from these (TestMoEModelParamsFromConfig); the model card
	// (https://huggingface.co/Qwen/Qwen3-235B-A22B) says 235B total, 22B activated.
	{
		Name:            "qwen3-235b-a22b",
		Layers:          94,
		Payloads:        2,
		LayerTokenBytes: 4 * 128 * bf16Bytes,
		Shape:           "4 KV heads x head_dim 128",
		Params:          235_093_634_560,
		ActiveParams:    22_190_763_520,
		HiddenSize:      4096,
		VocabSize:       151936,
		Heads:           64,
		Attention:       GQA,
		KVHeads:         4,
		HeadDim:         128,
		Served:          BF16,
		ServedSource:    "config.json torch_dtype bfloat16 (an -FP8 release is separate)",
	},
	glm52,
	// https://huggingface.co/zai-org/GLM-4.5/blob/main/config.json: 92 layers (first_k_dense_replace
	// 3, then 89 MoE of 160 routed experts, 8 routed + 1 shared a token, moe_intermediate_size
	// 1536; intermediate_size 12288 dense), hidden_size 5120, num_attention_heads 96,
	// num_key_value_heads 8, head_dim 128, q, k and v biases and a q and k norm, vocab_size 151552,
	// tie_word_embeddings false. 355B total, 32B active: https://github.com/zai-org/GLM-5 ("GLM-4.5
	// ... 355B parameters (32B active)") and the GLM-4.5 report (arXiv 2508.06471);
	// TestGLMParamsFromConfig recomputes them. The GLM before the shared-KV figures' GLM-5.2, and
	// the GQA one: its KV is 4.2 times GLM-5.2's latent a token.
	{
		Name:            "glm-4.5",
		Layers:          92,
		Payloads:        2,
		LayerTokenBytes: 8 * 128 * bf16Bytes,
		Shape:           "8 KV heads x head_dim 128",
		Params:          355_000_000_000,
		ActiveParams:    32_000_000_000,
		HiddenSize:      5120,
		VocabSize:       151552,
		Heads:           96,
		Attention:       GQA,
		KVHeads:         8,
		HeadDim:         128,
		Served:          BF16,
		ServedSource:    "config.json torch_dtype bfloat16 (GLM-4.5-FP8 is a separate release)",
	},
}

// glm52 is the GLM of the CP-shared KV cache's published figures: SGLang's shared KV cache for
// prefill CP was measured on GLM-5.2-FP8 at CP8 on 8 x H20-3e
// (https://github.com/sgl-project/sglang/pull/29847, /pull/31435, /pull/35309). Its architecture
// (glm_moe_dsa) is DeepSeek-V3's MLA plus a DSA sparse-attention indexer, from
// https://huggingface.co/zai-org/GLM-5.2/blob/main/config.json: 78 layers (3 dense, then 75 MoE
// of 256 routed experts, 8 routed + 1 shared a token, moe_intermediate_size 2048), hidden_size
// 6144, num_attention_heads 64, q_lora_rank 2048, kv_lora_rank 512, qk_rope_head_dim 64,
// qk_nope_head_dim 192, v_head_dim 256, vocab_size 154880, tie_word_embeddings false. The cache
// counted is the MLA latent only: the indexer's keys (index_head_dim 128, on the 21 "full" layers
// of indexer_types) are a second cache this table has no kind for, 21 x 128 elements a token
// beside the latent's 78 x 576 (6% more). Its attention is DSA's (DSA, DSADims): index_topk 2048,
// index_n_heads 32, index_head_dim 128, indexer_types "full" on layers 0, 1, 2 and every fourth
// from 6 to 74 (21 of 78), "shared" on the rest. Parameters: "744B-A40B", the download table of
// https://github.com/zai-org/GLM-5 (the GLM-5 report, arXiv 2602.15763, gives GLM-5 the same);
// TestGLMParamsFromConfig recomputes them from the fields above, its multi-token-prediction layer,
// which serving skips, left out as DeepSeek-V3's is.
var glm52 = Model{
	Name:            "glm-5.2",
	Layers:          78,
	Payloads:        1,
	LayerTokenBytes: (512 + 64) * bf16Bytes,
	Shape:           "MLA latent 512 + rope 64",
	Params:          744_000_000_000,
	ActiveParams:    40_000_000_000,
	HiddenSize:      6144,
	VocabSize:       154880,
	Heads:           64,
	Attention:       MLA,
	MLA: MLADims{
		QKNopeHeadDim: 192,
		QKRopeHeadDim: 64,
		VHeadDim:      256,
		KVLoraRank:    512,
	},
	DSA:          DSADims{TopK: 2048, IndexHeads: 32, IndexHeadDim: 128, IndexerLayers: 21},
	Served:       FP8,
	ServedSource: "SGLang's CP shared-KV figures run GLM-5.2-FP8 (sglang PR 29847)",
}

// ModelNames lists the table's names, for --help.
func ModelNames() []string {
	names := make([]string, len(models))
	for i, m := range models {
		names[i] = m.Name
	}
	return names
}

// LookupModel finds a model by name (case-insensitive); the error names --model and the choices.
func LookupModel(name string) (Model, error) {
	i := slices.IndexFunc(models, func(m Model) bool { return strings.EqualFold(m.Name, name) })
	if i < 0 {
		return Model{}, &errscope.ConfigError{
			Flag:   "model",
			Reason: fmt.Sprintf("%q is not one of %s", name, strings.Join(ModelNames(), ", ")),
		}
	}
	return models[i], nil
}

// TokenBytes is the model's KV bytes per token: every layer and payload.
func (m Model) TokenBytes() int64 {
	return int64(m.Layers) * int64(m.Payloads) * int64(m.LayerTokenBytes)
}

// RankTokenBytes is --token-bytes for this model in a CP group of cp ranks: a rank's share of one
// token's KV in one layer and payload, rounded up to a multiple of 8 (see Model).
func (m Model) RankTokenBytes(cp int) int {
	share := (m.LayerTokenBytes + cp - 1) / cp
	return (share + 7) / 8 * 8
}
