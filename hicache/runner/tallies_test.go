package runner

import (
	"reflect"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/report"
)

// TestTalliesHoldEveryCounter: the report's tallies hold every counter of the core by its name,
// type and agg tag, so that talliesOf carries each one and the report sums it as the core tags it.
func TestTalliesHoldEveryCounter(t *testing.T) {
	core, tallies := reflect.TypeOf(cache.Counters{}), reflect.TypeOf(report.Tallies{})
	for i := range core.NumField() {
		f := core.Field(i)
		g, ok := tallies.FieldByName(f.Name)
		if !ok || g.Type != f.Type || g.Tag.Get("agg") != f.Tag.Get("agg") {
			t.Errorf("cache.Counters.%s (%s, agg %q) has no twin in report.Tallies (found %v: %v)",
				f.Name, f.Type, f.Tag.Get("agg"), ok, g.Tag)
		}
	}
	c := cache.Counters{Requests: 3, L3WriteMismatches: 2, ObjectsWrong: 1}
	if got := talliesOf(c); got.Requests != 3 || got.L3WriteMismatches != 2 ||
		got.ObjectsWrong != 1 {
		t.Errorf("talliesOf(%+v) = %+v", c, got)
	}
}
