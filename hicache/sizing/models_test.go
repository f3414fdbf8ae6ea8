package sizing

import (
	"math"
	"testing"
)

// TestModelParamsFromConfig: a dense model's parameter count, recomputed from its config.json's
// fields as the table holds them (per layer: q, k, v and o projections, with Qwen2.5's q, k and v
// biases and Qwen3's q_norm and k_norm of head_dim each, the gated MLP's three matrices and two
// norms; then the embedding table, the untied output head and the final norm), equals the count the
// table holds: its safetensors' total, and for qwen3-32b the count its model card rounds to 32.8B.
// So a field typed wrong, or a count from another model, fails here.
func TestModelParamsFromConfig(t *testing.T) {
	for _, name := range []string{"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-72b", "qwen3-32b"} {
		m, err := LookupModel(name)
		if err != nil {
			t.Fatal(err)
		}
		h, q, kv := int64(m.HiddenSize), int64(m.Heads*m.HeadDim), int64(m.KVHeads*m.HeadDim)
		attention := h*q + 2*h*kv + q*h
		switch name {
		case "qwen2.5-72b":
			attention += q + 2*kv
		case "qwen3-32b":
			attention += 2 * int64(m.HeadDim)
		}
		perLayer := attention + 3*h*int64(m.Intermediate) + 2*h
		got := int64(m.Layers)*perLayer + 2*int64(m.VocabSize)*h + h
		if got != m.Params || m.ActiveParams != m.Params || m.Attention != GQA {
			t.Errorf(
				"%s: %d parameters from its config, the table says %d (active %d, %v)",
				name,
				got,
				m.Params,
				m.ActiveParams,
				m.Attention,
			)
		}
		if int64(m.LayerTokenBytes) != kv*bf16Bytes {
			t.Errorf(
				"%s: LayerTokenBytes %d, its KV heads say %d",
				name,
				m.LayerTokenBytes,
				kv*bf16Bytes,
			)
		}
	}
}

// TestMLAModelFields: DeepSeek-V3's cached latent is its kv_lora_rank plus the rope key, as
// LayerTokenBytes says, and it activates 37B of its 671B parameters.
func TestMLAModelFields(t *testing.T) {
	m, err := LookupModel("deepseek-v3")
	if err != nil {
		t.Fatal(err)
	}
	if m.Attention != MLA || (m.MLA.KVLoraRank+m.MLA.QKRopeHeadDim)*bf16Bytes != m.LayerTokenBytes ||
		m.ActiveParams != 37e9 || m.Params != 671e9 || m.Heads != 128 ||
		m.Attention.String() != "MLA" {
		t.Errorf("deepseek-v3: %+v", m)
	}
}

// TestMoEModelParamsFromConfig: Qwen3-235B-A22B's counts from its config.json (cited in the
// table): per layer, q, k, v and o with q_norm and k_norm, the router (num_experts 128 x hidden)
// and two norms, and 128 experts of three hidden x moe_intermediate_size 1536 matrices, of which a
// token multiplies num_experts_per_tok 8; then the untied embedding and head and the final norm.
// They come to the model card's 235B total and 22B activated (235.09B and 22.19B).
func TestMoEModelParamsFromConfig(t *testing.T) {
	m, err := LookupModel("qwen3-235b-a22b")
	if err != nil {
		t.Fatal(err)
	}
	h, q, kv := int64(m.HiddenSize), int64(m.Heads*m.HeadDim), int64(m.KVHeads*m.HeadDim)
	const experts, perToken, moeIntermediate = 128, 8, 1536
	expert := 3 * h * moeIntermediate
	shared := 2*h*q + 2*h*kv + 2*int64(m.HeadDim) + experts*h + 2*h
	outer := 2*int64(m.VocabSize)*h + h
	total := int64(m.Layers)*(shared+experts*expert) + outer
	active := int64(m.Layers)*(shared+perToken*expert) + outer
	if total != m.Params || active != m.ActiveParams || m.Attention != GQA ||
		int64(m.LayerTokenBytes) != kv*bf16Bytes {
		t.Errorf("qwen3-235b-a22b: %d and %d active from its config, the table %+v", total, active, m)
	}
}

// TestGLMParamsFromConfig: GLM-5.2's published 744B-A40B, recomputed from its config.json (cited
// in the table; q_lora_rank 2048, intermediate_size 12288 for the 3 dense layers,
// moe_intermediate_size 2048, 256 routed + 1 shared experts, 8 routed a token). Per layer the MLA
// projections (q_a, q_b, kv_a to the 576-wide latent and rope key, kv_b, o) and their norms, the
// router and two norms; the DSA indexer (about 0.2B) is left out. Total 743.2B, within 0.5% of
// 744B; active 41.1B, within 5% of the rounded 40B (the card does not say whether its 40B counts
// the embedding table, 0.95B, which this does).
func TestGLMParamsFromConfig(t *testing.T) {
	m, err := LookupModel("glm-5.2")
	if err != nil {
		t.Fatal(err)
	}
	h, heads, d := int64(m.HiddenSize), int64(m.Heads), m.MLA
	const qLora, dense, moeIntermediate, routed, perToken = 2048, 12288, 2048, 256, 8
	latent := int64(d.KVLoraRank + d.QKRopeHeadDim)
	attention := h*qLora + qLora + qLora*heads*int64(d.QKNopeHeadDim+d.QKRopeHeadDim) +
		h*latent + int64(d.KVLoraRank) +
		int64(d.KVLoraRank)*heads*int64(d.QKNopeHeadDim+d.VHeadDim) +
		heads*int64(d.VHeadDim)*h + 2*h
	expert := 3 * h * moeIntermediate
	moe := int64(m.Layers - 3)
	outer := 2*int64(m.VocabSize)*h + h
	base := int64(m.Layers)*attention + 3*3*h*dense + moe*(routed*h+routed) + outer
	total := base + moe*(routed+1)*expert
	active := base + moe*(perToken+1)*expert
	if math.Abs(float64(total)/float64(m.Params)-1) > 0.005 ||
		math.Abs(float64(active)/float64(m.ActiveParams)-1) > 0.05 {
		t.Errorf("glm-5.2: %d and %d active from its config, the table %d and %d",
			total, active, m.Params, m.ActiveParams)
	}
	glm45ParamsFromConfig(t)
}

// glm45ParamsFromConfig: GLM-4.5's published 355B-A32B from its config.json (cited in the table;
// intermediate_size 12288 for the 3 dense layers, moe_intermediate_size 1536, 160 routed + 1 shared
// experts, 8 routed a token, a biased router): per layer q, k, v and o with their biases and q and
// k norms, and two norms. Total 352.8B, within 1% of 355B; active 33.6B, within 6% of the rounded
// 32B (which may leave out the embedding table, 0.78B, as this does not).
func glm45ParamsFromConfig(t *testing.T) {
	m, err := LookupModel("glm-4.5")
	if err != nil {
		t.Fatal(err)
	}
	h, q, kv := int64(m.HiddenSize), int64(m.Heads*m.HeadDim), int64(m.KVHeads*m.HeadDim)
	const dense, moeIntermediate, routed, perToken = 12288, 1536, 160, 8
	attention := 2*h*q + 2*h*kv + q + 2*kv + 2*int64(m.HeadDim) + 2*h
	expert := 3 * h * moeIntermediate
	moe := int64(m.Layers - 3)
	outer := 2*int64(m.VocabSize)*h + h
	base := int64(m.Layers)*attention + 3*3*h*dense + moe*(routed*h+routed) + outer
	total := base + moe*(routed+1)*expert
	active := base + moe*(perToken+1)*expert
	if math.Abs(float64(total)/float64(m.Params)-1) > 0.01 ||
		math.Abs(float64(active)/float64(m.ActiveParams)-1) > 0.06 ||
		int64(m.LayerTokenBytes) != kv*bf16Bytes {
		t.Errorf("glm-4.5: %d and %d active from its config, the table %d and %d",
			total, active, m.Params, m.ActiveParams)
	}
}

// TestNewModelsKVBytes: each added row's KV bytes per token, by hand from its config.json in bf16
// (2 bytes an element): qwen3-32b 64 layers x K and V x 8 KV heads x 128 x 2 = 262,144 (256 KiB);
// qwen3-235b-a22b 94 x 2 x 4 x 128 x 2 = 192,512 (188 KiB); glm-5.2's MLA latent 78 layers x
// (kv_lora_rank 512 + qk_rope_head_dim 64) x 2 = 89,856 (87.75 KiB), as DeepSeek-V3's with 78
// layers for 61; glm-4.5 92 x 2 x 8 x 128 x 2 = 376,832 (368 KiB). And at CP8 a rank's share of one
// layer's token: 2048 / 8, 1024 / 8, 1152 / 8, 2048 / 8.
func TestNewModelsKVBytes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tokenBytes int64
		cp8        int
		kind       Attention
	}{
		{"qwen3-32b", 262_144, 256, GQA},
		{"qwen3-235b-a22b", 192_512, 128, GQA},
		{"glm-5.2", 89_856, 144, MLA},
		{"glm-4.5", 376_832, 256, GQA},
	} {
		m, err := LookupModel(tc.name)
		if err != nil {
			t.Fatal(err)
		}
		if m.TokenBytes() != tc.tokenBytes || m.RankTokenBytes(8) != tc.cp8 || m.Attention != tc.kind {
			t.Errorf("%s: %d bytes a token, %d a rank at cp 8, %v; want %d, %d, %v", tc.name,
				m.TokenBytes(), m.RankTokenBytes(8), m.Attention, tc.tokenBytes, tc.cp8, tc.kind)
		}
	}
}
