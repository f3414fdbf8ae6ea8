package sizing

import (
	"errors"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// TestDTypesByNameAndBytes: each precision by its name in any case, with its weight bytes; an
// unknown name is an invalid flag listing the choices.
func TestDTypesByNameAndBytes(t *testing.T) {
	for name, want := range map[string]struct {
		d     DType
		bytes float64
	}{"bf16": {BF16, 2}, "FP8": {FP8, 1}, " fp4 ": {FP4, 0.5}} {
		d, err := ParseDType("prefill-dtype", name)
		if err != nil || d != want.d || d.WeightBytes() != want.bytes {
			t.Errorf("%q: %v %v (%v bytes), want %v", name, d, err, d.WeightBytes(), want)
		}
	}
	var ce *errscope.ConfigError
	if _, err := ParseDType("prefill-dtype", "int4"); !errors.As(err, &ce) ||
		ce.Flag != "prefill-dtype" || ce.Reason != `"int4" is not one of bf16, fp8, fp4` {
		t.Errorf("int4: %v", err)
	}
}

// TestEveryModelHasItsServedPrecision: every row says the precision it is served in, and where
// that comes from.
func TestEveryModelHasItsServedPrecision(t *testing.T) {
	for _, m := range models {
		if m.Served < BF16 || m.Served > FP4 || m.ServedSource == "" {
			t.Errorf("%s: served in %v, source %q", m.Name, m.Served, m.ServedSource)
		}
	}
}
