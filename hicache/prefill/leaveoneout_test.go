package prefill

import (
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestLeaveOneOutGLMOnH20 (PUBLISHED.md, "Leave one out"): a --prefill-profile fitted on six of the
// seven GLM-5.2-FP8 cold prefills on 8 x H20-3e (glmPrefills, SGLang PR 31435) predicts the
// seventh, never one of its own rows, within 25%, for each of the seven. The profile is the
// product's remedy for a deployment the roofline does not fit, and a user would write exactly
// these rows (new_tokens 0 milliseconds); it has no free parameter, so "fitted" is its rows. The
// ends are the hard cases: 1M is extended from 256K and 512K (a line under a convex curve), 4K
// from 32K and 64K below the table (the smallest row's time per token, belowTable; the line alone
// would give 286 ms, 28% short).
//
// Beside it, the roofline with its efficiency fitted by least squares on the six points' log
// ratios (the geometric mean of modelled over published at efficiency 1: the points span 400x in
// time, and least squares on seconds would fit the 1M point alone): it meets 25% on the five
// middle points and misses 4K (its fixed costs per step, which the roofline has none of). Held to
// those values, which PUBLISHED.md gives.
func TestLeaveOneOutGLMOnH20(t *testing.T) {
	atOne, err := New(Options{Model: "glm-5.2", GPU: "h20-3e", GroupGPUs: 8, Efficiency: 1})
	if err != nil {
		t.Fatal(err)
	}
	glm := atOne.(*Roofline)
	// the roofline's seconds at efficiency 1 for each point (compute-bound: seconds scale as 1/e)
	unit := make([]float64, len(glmPrefills))
	for i, p := range glmPrefills {
		unit[i] = chunkedSeconds(glm, p.k*1024, 8192)
	}
	for out, p := range glmPrefills {
		var rows strings.Builder
		var logs float64
		for i, q := range glmPrefills {
			if i == out {
				continue
			}
			rows.WriteString(strconv.FormatInt(q.k*1024, 10) + " 0 " +
				strconv.FormatFloat(q.ms, 'f', -1, 64) + "\n")
			logs += math.Log(unit[i] / (q.ms / 1e3))
		}
		profile, err := ParseProfile("glm-5.2-h20-3e", strings.NewReader(rows.String()))
		if err != nil {
			t.Fatal(err)
		}
		published := p.ms / 1e3
		byProfile := profile.Seconds(p.k*1024, 0)/published - 1
		efficiency := math.Exp(logs / float64(len(glmPrefills)-1))
		byRoofline := unit[out]/efficiency/published - 1
		t.Logf("%4dK left out: profile %+.1f%%, roofline at its fitted efficiency %.3f %+.1f%%"+
			" (MODELLED)", p.k, 100*byProfile, efficiency, 100*byRoofline)
		if math.Abs(byProfile) > 0.25 {
			t.Errorf("%dK: the profile of the other six misses by %+.1f%%, over 25%%",
				p.k, 100*byProfile)
		}
		rooflineMisses := p.k == 4
		if (math.Abs(byRoofline) > 0.25) != rooflineMisses {
			t.Errorf("%dK: the fitted roofline misses by %+.1f%%; PUBLISHED.md says it misses "+
				"25%% at 4K only", p.k, 100*byRoofline)
		}
	}
}
