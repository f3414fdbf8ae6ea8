package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestValidationJSONHasAResult: validate's JSON report carries a top-level result, as run's does,
// so that a script reads one field of either: FAILED when a check failed, "OK, but ..." naming the
// skipped ones, else OK.
func TestValidationJSONHasAResult(t *testing.T) {
	for _, tc := range []struct {
		results []string
		want    string
	}{
		{[]string{"pass", "pass"}, "OK"},
		{[]string{"pass", "skip", "skip"}, "OK, but 2 checks skipped (c1, c2)"},
		{[]string{"skip", "fail"}, "FAILED"},
	} {
		v := &ValidationReport{Ranks: 2, CP: 2, DP: 1}
		for i, r := range tc.results {
			v.Checks = append(v.Checks, Check{Name: "c" + string(rune('0'+i)), Result: r})
		}
		path := filepath.Join(t.TempDir(), "validate.json")
		if err := v.WriteJSON(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Result *string `json:"result"`
		}
		if err := json.Unmarshal(b, &got); err != nil || got.Result == nil ||
			*got.Result != tc.want {
			t.Errorf(
				"checks %v: result %v (%v), want %q:\n%s",
				tc.results,
				got.Result,
				err,
				tc.want,
				b,
			)
		}
	}
}
