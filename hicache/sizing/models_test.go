package sizing

import "testing"

// TestModelParamsFromConfig: a dense model's parameter count, recomputed from its config.json's
// fields as the table holds them (per layer: q, k, v and o projections, with Qwen2.5's q, k and v
// biases, the gated MLP's three matrices and two norms; then the embedding table, the untied output
// head and the final norm), equals the count its safetensors hold. So a field typed wrong, or a
// count from another model, fails here.
func TestModelParamsFromConfig(t *testing.T) {
	for _, name := range []string{"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-72b"} {
		m, err := LookupModel(name)
		if err != nil {
			t.Fatal(err)
		}
		h, q, kv := int64(m.HiddenSize), int64(m.Heads*m.HeadDim), int64(m.KVHeads*m.HeadDim)
		attention := h*q + 2*h*kv + q*h
		if name == "qwen2.5-72b" {
			attention += q + 2*kv
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
