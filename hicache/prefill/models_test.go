package prefill

import "testing"

// TestAddedModelsFLOPsByHand: the rows added for GLM-5.2 and Qwen3, counted by hand from their
// config.json (cited in hicache/sizing/models.go). GLM-5.2's MLA pair is 2 x 64 heads x
// (qk_nope 192 + qk_rope 64 + v_head_dim 256) = 65,536 FLOPs and a cached token's latent expansion
// 2 x kv_lora_rank 512 x 64 x (192 + 256) = 29,360,128 a layer; Qwen3's GQA pairs 4 x 64 heads x
// head_dim 128 = 32,768 for both sizes (their 8 and 4 KV heads save bytes, not FLOPs). A token's
// linear FLOPs are 2 x (active - 2 x vocab x hidden) plus the head once: Qwen3-235B-A22B's
// 2 x (22,190,763,520 - 2 x 151,936 x 4,096) + 2 x 151,936 x 4,096 for one token.
func TestAddedModelsFLOPsByHand(t *testing.T) {
	glm := roofline(t, "glm-5.2", "h100", 8).Model
	if PairFLOPs(glm) != 65_536 || CachedExpandFLOPs(glm) != 29_360_128 {
		t.Errorf("glm-5.2: pair %v, expand %v", PairFLOPs(glm), CachedExpandFLOPs(glm))
	}
	if got, want := AttentionFLOPs(glm, 10, 1), 78*(11*65_536+10*29_360_128.0); got != want {
		t.Errorf("glm-5.2: attention %v, want %v", got, want)
	}
	for _, name := range []string{"qwen3-32b", "qwen3-235b-a22b"} {
		m := roofline(t, name, "h100", 8).Model
		if PairFLOPs(m) != 32_768 || CachedExpandFLOPs(m) != 0 {
			t.Errorf("%s: pair %v, expand %v", name, PairFLOPs(m), CachedExpandFLOPs(m))
		}
	}
	moe := roofline(t, "qwen3-235b-a22b", "h100", 8).Model
	embedding := 151_936 * 4_096.0
	if got, want := LinearFLOPs(moe, 1), 2*(22_190_763_520-2*embedding)+2*embedding; got != want {
		t.Errorf("qwen3-235b-a22b: one token's linear FLOPs %v, want %v", got, want)
	}
}
