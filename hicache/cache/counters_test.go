package cache

import (
	"reflect"
	"testing"
)

// TestEveryCounterIsAggregated: every field of Counters is an int64 with an agg tag the report
// knows, so that a counter added without saying how it sums over the job fails here instead of
// vanishing from the report.
func TestEveryCounterIsAggregated(t *testing.T) {
	typ := reflect.TypeOf(Counters{})
	known := map[string]bool{"group": true, "rank": true, "first": true}
	var c Counters
	total := 0
	for agg := range known {
		total += len(c.CounterFields(agg))
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Type.Kind() != reflect.Int64 || !known[f.Tag.Get("agg")] {
			t.Errorf(
				"Counters.%s (%s, agg %q): every counter is an int64 tagged agg:\"group\", \"rank\" or \"first\"",
				f.Name,
				f.Type,
				f.Tag.Get("agg"),
			)
		}
	}
	if total != typ.NumField() {
		t.Errorf("CounterFields lists %d of %d counters", total, typ.NumField())
	}
	// The pointers are into c: a write through one is the field's.
	*c.CounterFields("rank")[0] = 7
	if c.BytesD2H != 7 {
		t.Errorf("CounterFields(\"rank\")[0] is not &c.BytesD2H")
	}
}
