package bench

import (
	"errors"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// Each config names its bad field as the flag that sets it; cphicache bench reports that flag.
func TestValidateNamesTheFlag(t *testing.T) {
	allreduce := AllreduceConfig{
		MinCount:    1,
		MaxCount:    16,
		CountFactor: 4,
		Iters:       1,
		ItersLarge:  1,
		Rounds:      1,
	}
	e2e := E2EConfig{
		NPs:            []int{1},
		AssertEvery:    []int64{0},
		Repeats:        1,
		Launcher:       []string{"mpirun"},
		Binary:         "x",
		OutDir:         "o",
		TimeoutSeconds: 1,
	}
	for _, tc := range []struct {
		field string
		err   error
	}{
		{"step-factor", func() error { c := allreduce; c.CountFactor = 3; return c.Validate() }()},
		{"warmup", func() error { c := allreduce; c.Warmup = -1; return c.Validate() }()},
		{"rounds", func() error { c := allreduce; c.Rounds = 0; return c.Validate() }()},
		{"workers", func() error { c := smallCopyConfig(); c.Workers = 0; return c.Validate() }()},
		{"part-sizes", func() error { c := smallCopyConfig(); c.PartBytes = []int64{1 << 30}; return c.Validate() }()},
		{"pages", ReserveConfig{SlotsLog2: []int{4}, Pages: []int{16}, MinSeconds: 1}.Validate()},
		{"min-seconds", ReserveConfig{SlotsLog2: []int{4}, Pages: []int{1}}.Validate()},
		{"timeout", func() error { c := e2e; c.TimeoutSeconds = 0; return c.Validate() }()},
		{"assert-every-list", func() error { c := e2e; c.AssertEvery = []int64{-1}; return c.Validate() }()},
		{"warmup", StepConfig{Iters: 1, Warmup: -1, Rounds: 1}.Validate()},
		{"gap-us", StepConfig{Iters: 1, Rounds: 1, GapMicroseconds: -1}.Validate()},
	} {
		var ce *errscope.ConfigError
		if !errors.As(tc.err, &ce) || ce.Flag != tc.field {
			t.Errorf("error %v, want one naming %s", tc.err, tc.field)
		}
	}
}
