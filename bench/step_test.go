package bench

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
)

func TestStepConfigValidate(t *testing.T) {
	good := StepConfig{Iters: 10, Warmup: 0, Rounds: 1}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]StepConfig{
		"no iterations": {Iters: 0, Rounds: 1},
		"no rounds":     {Iters: 1, Rounds: 0},
		"negative gap":  {Iters: 1, Rounds: 1, GapMicroseconds: -1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// The C-seed side must be the seed design's step as the issue describes it, and C-fused the
// consensus vector.
func TestStepPlansModelTheSeedAndTheFusedStep(t *testing.T) {
	want := []stepCall{{words: 2}, {words: 2}, {words: 1}, {words: 1, max: true}}
	if !slices.Equal(seedStepPlan, want) || planWords(seedStepPlan) != 6 {
		t.Errorf(
			"seed plan %+v, want writing_check MIN 2, loading_check MIN 2, digest MIN 1, digest MAX 1",
			seedStepPlan,
		)
	}
	if len(fusedStepPlan) != 1 || fusedStepPlan[0].max ||
		planWords(fusedStepPlan) != cache.VectorWords {
		t.Errorf("fused plan %+v, want one MIN of %d words", fusedStepPlan, cache.VectorWords)
	}
	for side, info := range stepSideInfo {
		if info.name == "" || info.model == "" || planWords(info.plan) > stepPlanMaxWords {
			t.Errorf("side %d: %+v", side, info)
		}
	}
}

func TestStepTableHasEverySideAndItsRatio(t *testing.T) {
	rows := []StepRow{
		{Side: "ours", Model: "m", Calls: 1, Words: 9, Iters: 10, StepUs: 2, OursRatio: 1},
		{Side: "C-seed", Model: "m", Calls: 4, Words: 6, Iters: 10, StepUs: 4, OursRatio: 0.5},
	}
	var b bytes.Buffer
	WriteStepTable(&b, rows)
	var data []string
	for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
		if !strings.HasPrefix(l, "#") {
			data = append(data, l)
		}
	}
	if len(data) != 2 || !strings.HasSuffix(data[1], " 0") || !strings.Contains(data[1], "0.500") {
		t.Errorf("rows:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "# ours/C-seed 0.500") {
		t.Errorf("no headline ratio:\n%s", b.String())
	}
	if r, ok := StepRatio(rows, "C-seed"); !ok || r != 0.5 {
		t.Errorf("StepRatio %g %v", r, ok)
	}
	for _, bad := range []float64{0, math.NaN(), math.Inf(1), -1} {
		if _, ok := StepRatio([]StepRow{{Side: "C-seed", OursRatio: bad}}, "C-seed"); ok {
			t.Errorf("ratio %g accepted", bad)
		}
	}
	if _, ok := StepRatio(rows, "C-fused"); ok {
		t.Error("a missing side has a ratio")
	}
	if StepWrong([]StepRow{{Wrong: 2}, {Wrong: 3}}) != 5 {
		t.Error("StepWrong")
	}
}
