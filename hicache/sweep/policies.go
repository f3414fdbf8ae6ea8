package sweep

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/report"
)

// A sweep that compares the L2's policies (Group.Policies, --l2-policy given) runs each policy at
// every size on the shared pool and sets beside them the OFFLINE bound at the same capacity:
// hicache/bound at L1's pages plus the L2's slots, the most L1 + L2 hit tokens any policy could
// have over the same events, computed once per size by the first policy's run
// (config.Options.OfflineBound). With the serving clock the bound also has a MODELLED TTFT: the
// same requests on the virtual clock at the bound's hits, each request's as MIN's schedule gives
// them, loaded at no cost (report.OfflineBound says why that bounds no TTFT). A point whose hits
// pass the bound is a bug, and ends the sweep (underBound).

// PolicyCurve is one L2 policy's points on the shared pool, in the order of the sizes, and with the
// serving clock the size the answer's rule recommends on its curve (MODELLED).
type PolicyCurve struct {
	Policy      string  `json:"policy"`
	Points      []Point `json:"points"`
	Recommended *Choice `json:"recommended,omitempty"`
}

// BoundPoint is one size's OFFLINE bound: the size (as its points state it), the capacity the bound
// is computed at (L1's pages and the L2's slots), its hit tokens and their share of the prompt
// tokens, and with the serving clock the MODELLED TTFT at its hits.
type BoundPoint struct {
	L2Slots        int     `json:"l2_slots"`
	L2Tokens       int64   `json:"l2_tokens"`
	L2Bytes        int64   `json:"l2_bytes"`
	L2BytesPerNode int64   `json:"l2_bytes_per_node"`
	CapacityPages  int     `json:"capacity_pages"`
	HitTokens      int64   `json:"hit_tokens"`
	HitRate        float64 `json:"hit_rate"`
	// Serving: the TTFT at the bound's hits, loads free; not a bound on any policy's TTFT.
	Serving *ServingPoint `json:"serving,omitempty"`
}

// boundPoint states a run's OFFLINE bound (nil: it computed none) at its point's size.
func boundPoint(p Point, b *report.OfflineBound) *BoundPoint {
	if b == nil {
		return nil
	}
	out := &BoundPoint{
		L2Slots: p.L2Slots, L2Tokens: p.L2Tokens, L2Bytes: p.L2Bytes,
		L2BytesPerNode: p.L2BytesPerNode, CapacityPages: b.CapacityPages, HitTokens: b.HitTokens,
		HitRate: float64(b.HitTokens) / float64(max(1, b.PromptTokens)),
	}
	if s := b.Serving; s != nil {
		out.Serving = &ServingPoint{
			TTFTP50: s.TTFT.P50, TTFTP90: s.TTFT.P90, TTFTP99: s.TTFT.P99,
			PromptTokensPerSecond: s.PromptTokensPerSecond,
		}
	}
	return out
}

// underBound fails on a point whose L1 + L2 hit tokens pass the OFFLINE bound of its size (nil:
// none computed): no policy can (hicache/bound says why), so a point that does is a bug of the
// cache, its replay or the bound, never a result to print.
func underBound(p Point, b *BoundPoint) error {
	if b == nil {
		return nil
	}
	if hits := p.L1Tokens + p.L2HitTokens; hits > b.HitTokens {
		return fmt.Errorf(
			"BUG: the %s point under %s at L2 %d slots hit %d tokens (L1 %d, L2 %d), over the "+
				"OFFLINE bound of %d tokens at %d pages (L1 + L2): no policy can pass it; a bug of "+
				"the cache, its replay or hicache/bound",
			p.Design, policyName(p), p.L2Slots, hits, p.L1Tokens, p.L2HitTokens, b.HitTokens,
			b.CapacityPages,
		)
	}
	return nil
}

// policyName is a point's policy, or "its policy" when the sweep did not label it.
func policyName(p Point) string {
	if p.Policy == "" {
		return "its policy"
	}
	return p.Policy
}

// recommend sets each policy's recommended size, by the answer's rule over its own curve, with the
// serving clock.
func (res *Result) recommend(marginPct float64) {
	for i := range res.Policies {
		c := &res.Policies[i]
		if len(c.Points) == 0 || c.Points[0].Serving == nil {
			continue
		}
		c.Recommended = choose(c.Points, marginPct, func(p Point) (float64, float64) {
			return p.Serving.TTFTP50, p.Serving.TTFTP99
		})
		c.Recommended.HitRate = c.Points[c.Recommended.Point].HitRate
	}
}
