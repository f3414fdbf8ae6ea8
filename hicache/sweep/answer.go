package sweep

import (
	"math"

	"github.com/cphicache/cphicache/hicache/report"
)

// Answer is a sweep's answer to "how much L2 should I buy", from its points' modelled TTFT (with
// the serving clock; MODELLED, every figure of it): the smallest L2 whose TTFT p50 is within a
// stated margin of the best on the curve, what it buys beside no L2 and beside per-rank copies of
// the same bytes, the same with the modelled L3 under it, and the load at its hits.
type Answer struct {
	MarginPct float64 `json:"margin_pct"`
	// Policy is the L2 policy of the curve it chose from, when --l2-policy was given (the first
	// listed: Result.Points are its points; each policy's own size is its PolicyCurve's).
	Policy string `json:"policy,omitempty"`
	// L2 is the L2 to buy; WithL3 the L2 to buy with the modelled L3 under it, and that L3's size.
	L2     *Choice `json:"l2"`
	WithL3 *Choice `json:"with_l3,omitempty"`
	// NoL2 is the baseline of no L2 (L1 alone); PerRank the per-rank copies' point at the chosen
	// size (nil where --l2-design did not run them).
	NoL2    *ServingPoint `json:"no_l2,omitempty"`
	PerRank *Point        `json:"per_rank,omitempty"`
	// Load is the chosen point's: the demand beside what the group serves at its hits, and the
	// replicas --ttft-target takes.
	Load *report.ServingLoad `json:"load,omitempty"`
}

// Choice is one recommended size: the point chosen (its index in the curve's points), its L2, hit
// rate and TTFT, and the best TTFT p50 on the curve it is within the margin of.
type Choice struct {
	Point          int     `json:"point"`
	Design         string  `json:"design"`
	L2Tokens       int64   `json:"l2_tokens"`
	L2Bytes        int64   `json:"l2_bytes"` // the group's, at the sizing model's bytes
	L2BytesPerNode int64   `json:"l2_bytes_per_node"`
	HitRate        float64 `json:"hit_rate"` // L1 + L2 (+ L3 with one) over the prompt tokens
	TTFTP50        float64 `json:"ttft_p50_s"`
	TTFTP99        float64 `json:"ttft_p99_s"`
	BestTTFTP50    float64 `json:"best_ttft_p50_s"`
	BestPoint      int     `json:"best_point"`
	// With the modelled L3: the tokens it holds at the end (every block the trace writes: the L3
	// that serves this TTFT) and their bytes, the group's.
	L3Tokens int64 `json:"l3_tokens,omitempty"`
	L3Bytes  int64 `json:"l3_bytes,omitempty"`
}

// answer chooses from the curve (the shared pool's points, or the per-rank ones' when only those
// ran) within marginPct of its best TTFT p50; nil without the serving clock.
func (res *Result) answer(marginPct float64) *Answer {
	curve := res.Points
	if len(curve) == 0 {
		curve = res.PerRank
	}
	if len(curve) == 0 || curve[0].Serving == nil {
		return nil
	}
	a := &Answer{MarginPct: marginPct}
	a.L2 = choose(curve, marginPct, func(p Point) (float64, float64) {
		return p.Serving.TTFTP50, p.Serving.TTFTP99
	})
	a.L2.HitRate = curve[a.L2.Point].HitRate
	chosen := curve[a.L2.Point]
	a.Load = chosen.Serving.Load
	if res.NoL2 != nil {
		a.NoL2 = res.NoL2.Serving
	}
	if len(res.PerRank) == len(res.Points) && len(res.Points) > 0 {
		a.PerRank = &res.PerRank[a.L2.Point]
	}
	if chosen.Serving.WithL3 != nil {
		a.WithL3 = choose(curve, marginPct, func(p Point) (float64, float64) {
			return p.Serving.WithL3.TTFT.P50, p.Serving.WithL3.TTFT.P99
		})
		p := curve[a.WithL3.Point]
		l3 := p.Serving.WithL3
		tokens := float64(max(1, p.L1Tokens+p.L2HitTokens+p.MissTokens))
		a.WithL3.HitRate = float64(p.L1Tokens+p.L2HitTokens+l3.L3Tokens) / tokens
		a.WithL3.L3Tokens, a.WithL3.L3Bytes = l3.HeldTokens, l3.HeldTokens*res.TokenBytes
	}
	return a
}

// choose is the smallest point of curve (in the order of its sizes, the smallest first when they
// grow) whose TTFT p50 (ttft's first) is within marginPct of the curve's best.
func choose(curve []Point, marginPct float64, ttft func(Point) (p50, p99 float64)) *Choice {
	best, bestP50 := 0, math.Inf(1)
	for i, p := range curve {
		if v, _ := ttft(p); v < bestP50 {
			best, bestP50 = i, v
		}
	}
	pick := best
	for i, p := range curve {
		v, _ := ttft(p)
		if v <= bestP50*(1+marginPct/100) && p.L2Bytes < curve[pick].L2Bytes {
			pick = i
		}
	}
	p := curve[pick]
	p50, p99 := ttft(p)
	return &Choice{
		Point: pick, Design: p.Design, L2Tokens: p.L2Tokens, L2Bytes: p.L2Bytes,
		L2BytesPerNode: p.L2BytesPerNode, TTFTP50: p50, TTFTP99: p99,
		BestTTFTP50: bestP50, BestPoint: best,
	}
}
