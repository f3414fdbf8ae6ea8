package sizing

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cphicache/cphicache/hicache/errscope"
)

// Real models' KV geometry (--model), in bf16 (2 bytes per element).
//
// How a model maps to the geometry flags. The program's geometry gives every rank of a CP group a part of every
// page: a slot holds one page of --page-tokens tokens for every (rank, layer, payload), and --token-bytes is the
// bytes of one token in one rank's part of one layer and payload. In a CP group a sequence's tokens are split
// over the ranks (each rank holds the KV of its chunk, all heads, all layers), so over a page's worth of tokens
// each rank holds 1/cp of the page's KV. The program models that split as a page whose every token is shared by
// the cp ranks: a rank's part of a token is the model's per-layer-per-payload bytes divided by cp, rounded up to
// the 8-byte multiple the copy kernels need. So
//
//	--layers      = the model's layers
//	--payloads    = 2 (K and V) for a GQA model, 1 (the latent) for an MLA model
//	--token-bytes = ceil8(LayerTokenBytes / cp)
//
// and one slot holds cp x token-bytes x layers x payloads x page-tokens bytes, which is page-tokens x the model's
// KV bytes per token when cp divides LayerTokenBytes / 8: the L2's capacity in tokens, and so its hit rate, does
// not depend on the CP size, as in a real CP group whose host cache holds each token's KV once. Dividing by cp
// (rather than giving each rank a whole token) is what keeps a byte budget from counting each token cp times.
type Model struct {
	Name     string
	Layers   int
	Payloads int // 2 = K and V, 1 = an MLA latent
	// LayerTokenBytes: one token's KV in one layer and payload, whole (every CP rank's share together):
	// kv_heads x head_dim x 2 bytes for a GQA model, the latent's dimensions x 2 bytes for MLA.
	LayerTokenBytes int
	Shape           string // where LayerTokenBytes comes from, for --help and the summary
}

// bf16Bytes is the size of one KV element: the models below serve their KV cache in bf16.
const bf16Bytes = 2

// models is the table --model reads, from each model's config.json (num_hidden_layers, num_key_value_heads,
// head_dim or hidden_size / num_attention_heads; DeepSeek-V3's kv_lora_rank 512 + qk_rope_head_dim 64).
var models = []Model{
	{Name: "llama-3.1-8b", Layers: 32, Payloads: 2, LayerTokenBytes: 8 * 128 * bf16Bytes, Shape: "8 KV heads x head_dim 128"},
	{Name: "llama-3.1-70b", Layers: 80, Payloads: 2, LayerTokenBytes: 8 * 128 * bf16Bytes, Shape: "8 KV heads x head_dim 128"},
	{Name: "qwen2.5-72b", Layers: 80, Payloads: 2, LayerTokenBytes: 8 * 128 * bf16Bytes, Shape: "8 KV heads x head_dim 128"},
	{Name: "deepseek-v3", Layers: 61, Payloads: 1, LayerTokenBytes: (512 + 64) * bf16Bytes, Shape: "MLA latent 512 + rope 64"},
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
		return Model{}, &errscope.ConfigError{Flag: "model", Reason: fmt.Sprintf("%q is not one of %s", name, strings.Join(ModelNames(), ", "))}
	}
	return models[i], nil
}

// TokenBytes is the model's KV bytes per token: every layer and payload.
func (m Model) TokenBytes() int64 {
	return int64(m.Layers) * int64(m.Payloads) * int64(m.LayerTokenBytes)
}

// RankTokenBytes is --token-bytes for this model in a CP group of cp ranks: a rank's share of one token's KV in
// one layer and payload, rounded up to a multiple of 8 (see Model).
func (m Model) RankTokenBytes(cp int) int {
	share := (m.LayerTokenBytes + cp - 1) / cp
	return (share + 7) / 8 * 8
}
