package prefill

import "testing"

// TestLongerPrefixNeverCheaper: with the same new tokens, a longer cached prefix never makes a step
// cheaper, for every model and either attention path (the absorbed path's min must not undercut a
// shorter prefix's charge).
func TestLongerPrefixNeverCheaper(t *testing.T) {
	for _, name := range []string{"llama-3.1-8b", "llama-3.1-70b", "qwen2.5-72b", "deepseek-v3"} {
		r := roofline(t, name, "h200", 8)
		for _, n := range []int64{1, 8, 100, 170, 171, 1000, 8192} {
			prev := -1.0
			for _, c := range []int64{0, 1, 100, 4095, 16384, 131072, 725000} {
				got := r.BatchSeconds([]Request{{NewTokens: n, CachedTokens: c}})
				if got < prev {
					t.Errorf("%s new %d: cached %d costs %g s, less than a shorter prefix's %g s",
						name, n, c, got, prev)
				}
				prev = got
			}
		}
	}
}

// TestMLAFewNewTokensTakeAbsorbedPath: a DeepSeek-V3 step of 8 new tokens after a 64K prefix is
// charged the absorbed path, which is cheaper than expanding every cached latent; one of 8K new
// tokens is charged expansion, which is then the cheaper.
func TestMLAFewNewTokensTakeAbsorbedPath(t *testing.T) {
	r := roofline(t, "deepseek-v3", "h200", 8)
	m := r.Model
	const cached = 65536
	few := []Request{{NewTokens: 8, CachedTokens: cached}}
	expanded := LinearFLOPs(m, 8) + AttentionFLOPs(m, cached, 8)
	absorbed := LinearFLOPs(m, 8) + AbsorbedAttentionFLOPs(m, cached, 8)
	if !(absorbed < expanded/2) {
		t.Fatalf("absorbed %g FLOPs, expanded %g: want absorbed well below", absorbed, expanded)
	}
	if got := r.FLOPs(few); got != absorbed {
		t.Errorf("8 new after %d: %g FLOPs, want the absorbed path's %g", cached, got, absorbed)
	}
	many := []Request{{NewTokens: 8192, CachedTokens: cached}}
	exp := LinearFLOPs(m, 8192) + AttentionFLOPs(m, cached, 8192)
	if got := r.FLOPs(many); got != exp {
		t.Errorf("8192 new after %d: %g FLOPs, want expansion's %g", cached, got, exp)
	}
}
