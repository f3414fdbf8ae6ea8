package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/internal/errscope"
)

// beforeError is the error run's (or sweep's) Before gives args, in process: no binary, no MPI.
func beforeError(command string, args ...string) error {
	var flags []cli.Flag
	var before cli.BeforeFunc
	if command == "sweep" {
		o := &sweepOptions{}
		flags, before = o.flags(), o.before
	} else {
		o := &runOptions{}
		flags, before = append(append(o.flags(), o.metricsFlags()...), servingFlags(&o.serving, false)...), o.before
	}
	app := &cli.App{
		Commands: []*cli.Command{
			{
				Name:   command,
				Flags:  flags,
				Before: before,
				Action: func(*cli.Context) error { return nil },
			},
		},
	}
	return app.Run(append([]string{"cphicache", command}, args...))
}

// wantRefused fails t unless err is an invalid --flag whose reason holds want.
func wantRefused(t *testing.T, args []string, err error, flag, want string) {
	t.Helper()
	var ce *errscope.ConfigError
	if !errors.As(err, &ce) || ce.Flag != flag || !strings.Contains(ce.Reason, want) {
		t.Errorf("%v: %v, want an invalid --%s saying %q", args, err, flag, want)
	}
}

// TestUnusedFlagsAreRefused: a flag that would do nothing in this run, because the flag that uses
// it is missing (or, for the synthetic workload's, because --trace replaces it), is refused before
// MPI starts, naming itself and what it needs, even with a value that is wrong besides; so is a
// sweep's --group-gpus 0, which modelled a group of one GPU.
func TestUnusedFlagsAreRefused(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "t.jsonl")
	if err := os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const noClock = "needs --gpu or --prefill-profile"
	clock := []string{"--gpu", "h200", "--model", "deepseek-v3"}
	sweep := []string{"--l2-slots", "16,32"}
	for _, tc := range []struct {
		command string
		args    []string
		flag    string
		want    string
	}{
		{"run", []string{"--request-rate", "5"}, "request-rate", noClock},
		{"run", []string{"--clients", "3"}, "clients", noClock},
		{"run", []string{"--time-scale", "0"}, "time-scale", noClock},
		{"run", []string{"--step-tokens", "0"}, "step-tokens", noClock},
		{"run", []string{"--step-requests", "3"}, "step-requests", noClock},
		{"run", []string{"--prefill-efficiency", "7"}, "prefill-efficiency", noClock},
		{"run", []string{"--prefill-model", "foo"}, "prefill-model", noClock},
		{"run", []string{"--prefill-dtype", "fp8"}, "prefill-dtype", noClock},
		{"run", []string{"--host-link-rate", "35GB/s"}, "host-link-rate", noClock},
		{"run", []string{"--l3-read-rate", "0"}, "l3-read-rate", noClock},
		{"run", []string{"--think-time", "-5s"}, "think-time", noClock},
		{"run", append([]string{"--request-rate", "1", "--think-time", "1s"}, clock...), "think-time", "needs --clients"},
		{"run", []string{"--conversations", "5", "--gpu", "h999"}, "gpu", `"h999" is not one of`},
		{"run", []string{"--trace-limit", "5"}, "trace-limit", "needs --trace"},
		{"run", []string{"--trace-format", "mooncake"}, "trace-format", "needs --trace"},
		{"run", []string{"--trace-block-tokens", "64"}, "trace-block-tokens", "needs --trace"},
		{"run", []string{"--trace", trace, "--conversations", "5"}, "conversations", "--trace replaces"},
		{"run", []string{"--trace", trace, "--flush-every-requests", "5"}, "flush-every-requests", "--trace replaces"},
		{"run", []string{"--timeline-steps", "5"}, "timeline-steps", "needs --timeline"},
		{"run", []string{"--timeline-every", "5"}, "timeline-every", "needs --timeline"},
		{"sweep", append([]string{"--group-gpus", "0"}, sweep...), "group-gpus", "0 must be 1 or more"},
		{"sweep", append([]string{"--trace-limit", "5"}, sweep...), "trace-limit", "needs --trace"},
		{"sweep", append([]string{"--trace", trace, "--turns-max", "2"}, sweep...), "turns-max", "--trace replaces"},
	} {
		wantRefused(t, tc.args, beforeError(tc.command, tc.args...), tc.flag, tc.want)
	}
	// Given by its environment variable alone, a flag is given.
	t.Setenv("CPHICACHE_CLIENTS", "3")
	wantRefused(t, []string{"CPHICACHE_CLIENTS=3"}, beforeError("run"), "clients", noClock)
}

// TestUsedFlagsAreAccepted: the same flags where something uses them.
func TestUsedFlagsAreAccepted(t *testing.T) {
	timeline := filepath.Join(t.TempDir(), "tl.json")
	clock := []string{"--gpu", "h200", "--model", "deepseek-v3"}
	for _, tc := range []struct {
		command string
		args    []string
	}{
		{"run", append([]string{"--request-rate", "5", "--time-scale", "3", "--step-tokens", "100", "--l3-read-rate", "1GB/s"}, clock...)},
		{"run", append([]string{"--request-rate", "5", "--prefill-dtype", "bf16", "--host-link-rate", "35GB/s", "--prefill-efficiency", "1/0.116"}, clock...)},
		{"run", append([]string{"--clients", "3", "--think-time", "1s"}, clock...)},
		{"run", []string{"--timeline", timeline, "--timeline-steps", "5", "--timeline-every", "2"}},
		{"run", []string{"--trace", "t.jsonl", "--trace-limit", "5", "--seed", "3", "--vocab-size", "1000"}},
		{"run", []string{"--conversations", "5", "--seed", "3"}},
		{"sweep", append([]string{"--group-gpus", "2", "--request-rate", "5", "--l2-slots", "16,32"}, clock...)},
		// the group's GPUs size its L1 (each GPU's --device-bytes) with the clock off too
		{"sweep", []string{"--group-gpus", "4", "--device-bytes", "1MiB", "--l2-slots", "16,32"}},
	} {
		if err := beforeError(tc.command, tc.args...); err != nil {
			t.Errorf("%s %v: %v", tc.command, tc.args, err)
		}
	}
}
