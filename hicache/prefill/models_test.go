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

// TestDSAFLOPsByHand: GLM-5.2's DSA (index_topk 2048, index_n_heads 32, index_head_dim 128, 21
// indexer layers, cited in hicache/sizing/models.go). A cold 4,096-token prompt: its first 2,048
// tokens attend to all their keys (2,048 x 2,049 / 2 pairs), the rest to 2,048 each; the indexer
// scores all 4,096 x 4,097 / 2 causal pairs on 21 layers at 2 x 32 x 128 FLOPs. Past the top-k a
// longer context costs attention linearly and the indexer quadratically: doubling a 64K prompt
// doubles the one (within the first 2,048 queries' share) and quadruples the other.
func TestDSAFLOPsByHand(t *testing.T) {
	glm := roofline(t, "glm-5.2", "h20-3e", 8).Model
	if got, want := AttendedPairs(glm, 0, 4096), 2048*2049/2+2048*2048.0; got != want {
		t.Errorf("glm-5.2: %v pairs a layer for a 4K prompt, want %v", got, want)
	}
	if got, want := AttendedPairs(glm, 100_000, 10), 10*2048.0; got != want {
		t.Errorf("glm-5.2: %v pairs for 10 tokens after 100K, want %v", got, want)
	}
	if got, want := AttendedPairs(glm, 2040, 20), 8*2044.5+12*2048; got != want {
		t.Errorf("glm-5.2: %v pairs across the top-k, want %v", got, want)
	}
	if got, want := IndexerFLOPs(glm, 0, 4096), 21*(4096*4097/2.0)*8192; got != want {
		t.Errorf("glm-5.2: indexer %v FLOPs, want %v", got, want)
	}
	dense := roofline(t, "deepseek-v3", "h20-3e", 8).Model
	if IndexerFLOPs(dense, 0, 4096) != 0 || AttendedPairs(dense, 0, 4096) != 4096*4097/2.0 {
		t.Error("deepseek-v3 is dense: no indexer, every causal pair")
	}
	pairs := func(n int64) float64 { return AttendedPairs(glm, 0, n) }
	if r := pairs(131072) / pairs(65536); r < 2 || r > 2.02 {
		t.Errorf("glm-5.2: attention pairs grow %.3fx from 64K to 128K, want linear (2x)", r)
	}
	if r := IndexerFLOPs(glm, 0, 131072) / IndexerFLOPs(glm, 0, 65536); r < 3.99 || r > 4.01 {
		t.Errorf("glm-5.2: the indexer grows %.3fx from 64K to 128K, want quadratic (4x)", r)
	}
}
