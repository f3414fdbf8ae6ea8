package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// TestSimModes: sim's --mode draws jobs in each mode, the liveness mode says its jobs ended by the
// watchdog, the swarm mode prints its coverage, and a mode it does not know is refused naming the
// flag.
func TestSimModes(t *testing.T) {
	for mode, want := range map[string]string{"liveness": "liveness: 30 jobs", "swarm": "swarm (30 jobs", "all": "sim: OK", "plain": "sim: OK", "serving": "serving clock (MODELLED): "} {
		var out strings.Builder
		o := &simOptions{seed: 3, jobs: 30, mode: mode}
		if err := o.run(&out); err != nil || !strings.Contains(out.String(), want) ||
			!strings.Contains(out.String(), "mode "+mode) {
			t.Errorf("--mode %s: %v, want %q in:\n%s", mode, err, want, out.String())
		}
	}
	var cfg *errscope.ConfigError
	if err := (&simOptions{seed: 3, jobs: 1, mode: "random"}).run(&strings.Builder{}); !errors.As(
		err,
		&cfg,
	) ||
		cfg.Flag != "mode" {
		t.Errorf("--mode random: %v, want a configuration error naming --mode", err)
	}
}
