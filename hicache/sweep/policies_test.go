package sweep

import (
	"strings"
	"testing"
)

// TestAPointOverTheBoundIsABug: a point whose L1 + L2 hits pass its size's OFFLINE bound fails the
// sweep, naming the point, its policy and the bound; at the bound, or without one, it passes.
func TestAPointOverTheBoundIsABug(t *testing.T) {
	b := &BoundPoint{CapacityPages: 320, HitTokens: 1000}
	p := Point{Design: DesignShared, Policy: "slru", L2Slots: 64, L1Tokens: 900, L2HitTokens: 100}
	if err := underBound(p, b); err != nil {
		t.Errorf("at the bound: %v", err)
	}
	p.L2HitTokens++
	err := underBound(p, b)
	for _, want := range []string{"BUG", "shared point under slru at L2 64 slots hit 1001 tokens",
		"OFFLINE bound of 1000 tokens at 320 pages"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("over the bound: %v, want an error saying %q", err, want)
		}
	}
	if err := underBound(p, nil); err != nil {
		t.Errorf("without a bound: %v", err)
	}
}

// TestEachPolicyHasItsRecommendedSize: with the serving clock each policy's curve gets the answer's
// rule applied to it alone: the smallest L2 within the margin of that curve's best TTFT p50.
func TestEachPolicyHasItsRecommendedSize(t *testing.T) {
	res := &Result{Policies: []PolicyCurve{
		{Policy: "lru", Points: []Point{point(100, 9, 20), point(200, 1.04, 3), point(400, 1, 2)}},
		{Policy: "slru", Points: []Point{point(100, 2, 20), point(200, 1.5, 3), point(400, 1, 2)}},
		{Policy: "admit_seen", Points: []Point{{L2Bytes: 100}}}, // no serving clock: no answer
	}}
	res.recommend(5)
	if r := res.Policies[0].Recommended; r == nil || r.L2Bytes != 200 || r.HitRate != 0.02 {
		t.Errorf("lru: %+v, want 200 bytes (1.04 s, within 5%% of 1 s)", r)
	}
	if r := res.Policies[1].Recommended; r == nil || r.L2Bytes != 400 || r.BestTTFTP50 != 1 {
		t.Errorf("slru: %+v, want 400 bytes (1.5 s at 200 is not within 5%% of 1 s)", r)
	}
	if r := res.Policies[2].Recommended; r != nil {
		t.Errorf("without the serving clock: %+v, want none", r)
	}
}
