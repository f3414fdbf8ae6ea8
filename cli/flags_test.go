package cli

import (
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// These tests need no mpirun: they look at the flag definitions, and run commands whose Before
// fails, so that no Action (and no MPI) starts.

// commandFlags lists every flag of every command, subcommands included, under the command's path.
func commandFlags(prefix string, cmds []*cli.Command, visit func(path string, f cli.Flag)) {
	for _, cmd := range cmds {
		path := strings.TrimSpace(prefix + " " + cmd.Name)
		for _, f := range cmd.Flags {
			visit(path, f)
		}
		commandFlags(path, cmd.Subcommands, visit)
	}
}

// definition is all a user sees of a flag: the help line (names, usage, default, environment
// variable) and its category.
func definition(f cli.Flag) string {
	category := ""
	if cf, ok := f.(cli.CategorizableFlag); ok {
		category = cf.GetCategory()
	}
	return fmt.Sprintf("%s [category %q]", f, category)
}

// TestEveryFlagIsDefinedOnce: a flag is its environment variable. Two commands that take the same
// variable must take it with one definition, which holds when both build the flag from one function
// (seedFlags, syntheticFlags, globalFlags); outside bench, whose subcommands name theirs
// CPHICACHE_BENCH_<SUB>_<NAME>, and sim, whose --seed and --cp mean something else than run's and
// are CPHICACHE_SIM_<NAME>, the variable is CPHICACHE_<NAME>, so that a flag of the same name is
// the same flag everywhere, but for the output flags whose names say nothing alone
// (commandScopedFlags): CPHICACHE_<COMMAND>_<NAME>, as bench's. commandScopedFlags: CPHICACHE_JSON
// or CPHICACHE_FORMAT would not say whose.
var commandScopedFlags = map[string]bool{"json": true, "plot": true, "format": true, "output": true}

func TestEveryFlagIsDefinedOnce(t *testing.T) {
	defs := map[string]string{} // environment variable -> definition
	where := map[string]string{}
	commandFlags("", newApp().Commands, func(path string, f cli.Flag) {
		name := f.Names()[0]
		envs := f.(interface{ GetEnvVars() []string }).GetEnvVars()
		if len(envs) == 0 {
			t.Errorf("%s --%s has no environment variable", path, name)
			return
		}
		want := "CPHICACHE_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		if commandScopedFlags[name] || path == "sim" {
			want = "CPHICACHE_" + strings.ToUpper(
				strings.ReplaceAll(strings.ReplaceAll(path, "-", "_"), " ", "_"),
			) + want[len("CPHICACHE"):]
		}
		if !strings.HasPrefix(path, "bench ") && (len(envs) != 1 || envs[0] != want) {
			t.Errorf("%s --%s: environment variables %v, want [%s]", path, name, envs, want)
		}
		def, at := definition(f), path+" --"+name
		if other, ok := defs[envs[0]]; ok && other != def {
			t.Errorf(
				"%s is defined twice:\n  %s: %s\n  %s: %s",
				envs[0],
				where[envs[0]],
				other,
				at,
				def,
			)
		}
		defs[envs[0]], where[envs[0]] = def, at
	})
}

// TestEveryPlaceholderIsOneWord: urfave/cli shows the first `quoted` words of a flag's usage as its
// value's placeholder (--run-args FLAGS); a quoted phrase (`cphicache run`) showed as "--run-args
// cphicache run", which reads as two more arguments.
func TestEveryPlaceholderIsOneWord(t *testing.T) {
	commandFlags("", newApp().Commands, func(path string, f cli.Flag) {
		usage := f.(cli.DocGenerationFlag).GetUsage()
		if _, quoted, ok := strings.Cut(usage, "`"); ok {
			if placeholder, _, _ := strings.Cut(quoted, "`"); strings.ContainsAny(
				placeholder,
				" -",
			) {
				t.Errorf(
					"%s --%s shows the placeholder %q: want one word (FLAGS)",
					path,
					f.Names()[0],
					placeholder,
				)
			}
		}
	})
}

// TestEveryFlagHasADestination: every value reaches its command through its options struct, never
// through a lookup by name (c.Int("layers")), which a renamed flag would break silently.
func TestEveryFlagHasADestination(t *testing.T) {
	commandFlags("", newApp().Commands, func(path string, f cli.Flag) {
		dest := reflect.ValueOf(f).Elem().FieldByName("Destination")
		if !dest.IsValid() || dest.IsNil() {
			t.Errorf("%s --%s has no Destination", path, f.Names()[0])
		}
	})
}

// TestBeforeNamesTheFlag: a bad value fails in the command's Before with a *errscope.ConfigError
// naming the flag, from the command line and from the environment alike.
func TestBeforeNamesTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string // NAME=VALUE, or empty
		flag string
	}{
		{[]string{"gen-trace", "--conversations", "0"}, "", "conversations"},
		{[]string{"gen-trace", "--vocab-size", "0"}, "", "vocab-size"},
		{[]string{"gen-trace"}, "CPHICACHE_TURNS_MAX=0", "turns-max"},
		{[]string{"run", "--vocab-size", "0"}, "", "vocab-size"},
		{[]string{"run", "--layout", "diagonal"}, "", "layout"},
		{[]string{"run", "--write-policy", "write_sideways"}, "", "write-policy"},
		{[]string{"run", "--inject-hang", "x@y"}, "", "inject-hang"},
		{[]string{"run", "--inject-setup-error", "x"}, "", "inject-setup-error"},
		{[]string{"run", "--cp", "0"}, "", "cp"},
		{[]string{"run", "--metrics-file", "/no/such/dir/cphicache.prom"}, "", "metrics-file"},
		{[]string{"run", "--metrics-interval", "-1s"}, "", "metrics-interval"},
		{[]string{"run", "--timeline", "/no/such/dir/t.json"}, "", "timeline"},
		{[]string{"run", "--timeline", "t.json", "--timeline-steps", "-1"}, "", "timeline-steps"},
		{[]string{"run", "--timeline", "t.json"}, "CPHICACHE_TIMELINE_EVERY=0", "timeline-every"},
		// Every output path is checked before the work (its directory exists and is writable),
		// naming its flag.
		{[]string{"run", "--report", "/no/such/dir/r.json"}, "", "report"},
		{[]string{"validate"}, "CPHICACHE_REPORT=/no/such/dir/v.json", "report"},
		{[]string{"run", "--report", "."}, "", "report"}, // a directory
		{[]string{"sweep", "--l2-slots", "64", "--json", "/no/such/dir/s.json"}, "", "json"},
		{[]string{"sweep", "--l2-slots", "64", "--plot", "/no/such/dir/s.png"}, "", "plot"},
		{[]string{"sweep", "--l2-slots", "64", "--plot", "s.pnj"}, "", "plot"}, // no image format
		{[]string{"gen-trace", "-o", "/no/such/dir/t.jsonl"}, "", "output"},
		{[]string{"run"}, "CPHICACHE_METRICS_INTERVAL=10s", "metrics-interval"}, // without a file
		{[]string{"run"}, "CPHICACHE_DP=-1", "dp"},
		{[]string{"validate", "--token-bytes", "12"}, "", "token-bytes"},
		{[]string{"validate", "--watchdog-timeout", "-5s"}, "", "watchdog-timeout"},
		{[]string{"topo", "--log-level", "loud"}, "", "log-level"},
		{[]string{"bench", "allreduce", "--max-size", "12"}, "", "max-size"},
		{[]string{"bench", "allreduce", "--log-level", "loud"}, "", "log-level"},
		{[]string{"bench", "copy", "--layers", "0"}, "", "layers"},
		{[]string{"bench", "allreduce", "--step-factor", "3"}, "", "step-factor"},
		{[]string{"bench", "step", "--rounds", "0"}, "", "rounds"},
		{[]string{"bench", "reserve", "--pages", "4096", "--slots-log2", "10"}, "", "pages"},
		{[]string{"bench", "e2e", "--timeout", "0s"}, "", "timeout"},
		{[]string{"bench", "reserve", "--slots-log2", "40"}, "", "slots-log2"},
		{[]string{"bench", "e2e", "--np-list", "0"}, "", "np-list"},
		{[]string{"run", "--l3-dir", "/no/such/l3"}, "", "l3-dir"},
		{[]string{"validate", "--l3-dir", "l3.go"}, "", "l3-dir"},
		{[]string{"run", "--l3-bytes", "1TiB"}, "", "l3-bytes"}, // without --l3-dir
		{[]string{"run"}, "CPHICACHE_L3_WRITE_POLICY=write_back", "l3-write-policy"},
		{[]string{"run", "--l3-dir", ".", "--l3-block-tokens", "100"}, "", "l3-block-tokens"},
		{[]string{"run", "--l3-dir", ".", "--l3-bytes", "lots"}, "", "l3-bytes"},
		{[]string{"run", "--l3-dir", ".", "--l3-write-policy", "write_around"}, "", "l3-write-policy"},
		{[]string{"run", "--l3-dir", ".", "--l3-prefetch-policy", "eager"}, "", "l3-prefetch-policy"},
		{[]string{"run", "--l3-dir", ".", "--l3-prefetch-threshold", "-1"}, "", "l3-prefetch-threshold"},
		{[]string{"bench", "l3", "--l3-dir", "/no/such/l3"}, "", "l3-dir"},
		{[]string{"bench", "l3", "--block-bytes", "5000"}, "", "block-bytes"},
		{[]string{"bench", "l3"}, "CPHICACHE_BENCH_L3_BLOCKS=0", "blocks"},
		{[]string{"l3", "stat"}, "", "l3-dir"},
		{[]string{"l3", "stat", "--l3-dir", "/no/such/l3"}, "", "l3-dir"},
		{[]string{"l3", "clear"}, "CPHICACHE_L3_DIR=l3.go", "l3-dir"}, // a file
		{[]string{"l3", "clear", "--l3-dir", ".", "--l3-namespace-fingerprint", "xyz"}, "", "l3-namespace-fingerprint"},
		{[]string{"l3", "clear", "--l3-dir", ".", "--l3-namespace-fingerprint", "1234567890abcdef0"}, "", "l3-namespace-fingerprint"},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env, func(t *testing.T) {
			if name, value, ok := strings.Cut(tc.env, "="); ok {
				t.Setenv(name, value) // until the subtest ends
			}
			err := newApp().Run(append([]string{"cphicache"}, tc.args...))
			var ce *errscope.ConfigError
			if !errors.As(err, &ce) || ce.Flag != tc.flag {
				t.Errorf("error %v, want an invalid --%s", err, tc.flag)
			}
		})
	}
}

// captureRun parses args with run's flags and Before, and returns the options Before built.
func captureRun(t *testing.T, args ...string) *config.Options {
	t.Helper()
	o := &runOptions{}
	flags := append(append(o.flags(), o.metricsFlags()...), servingFlags(&o.serving, false)...)
	app := &cli.App{
		Commands: []*cli.Command{
			{
				Name:   "run",
				Flags:  flags,
				Before: o.before,
				Action: func(*cli.Context) error { return nil },
			},
		},
	}
	if err := app.Run(append([]string{"cphicache", "run"}, args...)); err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return o.opts
}

// TestRunOptionsReachTheirFields: each flag lands in its own field of config.Options, and the
// defaults are the synthetic workload's and the documented ones.
func TestRunOptionsReachTheirFields(t *testing.T) {
	got := captureRun(t)
	if got.Synthetic != workload.DefaultSyntheticConfig() || got.Seed != 1 || got.VocabSize != 32000 ||
		got.Layers != 4 || got.PayloadsPerLayer != 2 || got.PageTokens != 16 || got.TokenBytes != 32 ||
		got.DevicePages != 512 || got.L2Slots != 2048 || got.SlabBytesMax != 64<<20 || got.Layout != pool.LayerFirst ||
		got.BatchRequests != 4 || got.PlacementAssertEvery != 8 || got.FlushEvery != 0 || got.Collective != "mpi" ||
		got.WatchdogTimeout != 120*time.Second || got.Quiet || got.InjectHang.Set || got.JobID == "" ||
		got.MetricsPath != "" ||
		got.MetricsInterval != 0 ||
		got.TimelinePath != "" ||
		got.TimelineWindow != (timeline.Window{Steps: 200, Every: 1}) {
		t.Errorf("defaults: %+v", got)
	}
	report, metrics := filepath.Join(t.TempDir(), "r.json"), filepath.Join(t.TempDir(), "m.prom")
	got = captureRun(
		t,
		"--metrics-file",
		metrics,
		"--metrics-interval",
		"3s",
		"--timeline",
		report+".trace",
		"--timeline-steps",
		"7",
		"--timeline-every",
		"3",
		"--seed",
		"9",
		"--vocab-size",
		"1000",
		"--conversations",
		"3",
		"--turns-max",
		"2",
		"--system-prompts",
		"5",
		"--system-prompt-tokens",
		"6",
		"--turn-tokens",
		"7",
		"--output-tokens",
		"8",
		"--flush-every-requests",
		"11",
		"--layers",
		"3",
		"--payloads",
		"1",
		"--page-tokens",
		"8",
		"--token-bytes",
		"64",
		"--device-pages",
		"100",
		"--l2-slots",
		"300",
		"--slab-bytes-max",
		"1MiB",
		"--layout",
		"page_first",
		"--write-policy",
		"write_back",
		"--batch-requests",
		"5",
		"--placement-assert-every",
		"6",
		"--flush-every",
		"12",
		"--watchdog-timeout",
		"7s",
		"--report",
		report,
		"--quiet",
		"--job-id",
		"job7",
		"--inject-divergence",
		"1@2",
		"--inject-hang",
		"1@3",
		"--inject-exit",
		"1@4",
		"--inject-copy-error",
		"1@5",
		"--inject-stuck-copy",
		"1@6",
		"--inject-setup-error",
		"1",
	)
	wantSynthetic := workload.SyntheticConfig{
		Seed:               9,
		Conversations:      3,
		TurnsMax:           2,
		SystemPrompts:      5,
		SystemPromptTokens: 6,
		TurnTokens:         7,
		OutputTokens:       8,
		VocabSize:          1000,
		FlushEvery:         11,
	}
	policy, _ := cache.ParseWritePolicy("write_back")
	in := func(step int64) config.Injection { return config.Injection{Rank: 1, Step: step, Set: true} }
	if got.Synthetic != wantSynthetic || got.Seed != 9 || got.VocabSize != 1000 ||
		got.Layers != 3 || got.PayloadsPerLayer != 1 ||
		got.PageTokens != 8 || got.TokenBytes != 64 || got.DevicePages != 100 ||
		got.L2Slots != 300 || got.SlabBytesMax != 1<<20 ||
		got.Layout != pool.PageFirst || got.Policy != policy || got.BatchRequests != 5 ||
		got.PlacementAssertEvery != 6 ||
		got.FlushEvery != 12 || got.WatchdogTimeout != 7*time.Second || got.ReportPath != report ||
		!got.Quiet || got.JobID != "job7" ||
		got.MetricsPath != metrics || got.MetricsInterval != 3*time.Second ||
		got.TimelinePath != report+".trace" || got.TimelineWindow != (timeline.Window{Steps: 7, Every: 3}) ||
		got.InjectDivergence != in(2) || got.InjectHang != in(3) ||
		got.InjectExit != in(4) ||
		got.InjectCopyError != in(5) ||
		got.InjectStuckCopy != in(6) ||
		got.InjectSetupError != (config.Injection{Rank: 1, Set: true}) {
		t.Errorf("every flag set: %+v", got)
	}
	// The trace's flags, with a trace: the synthetic workload's are then refused
	// (TestUnusedFlagsAreRefused).
	if got = captureRun(t, "--trace", "t.jsonl", "--trace-limit", "5", "--trace-format", "mooncake", "--trace-block-tokens", "64"); got.TracePath != "t.jsonl" ||
		got.TraceLimit != 5 ||
		got.TraceFormat != workload.TraceMooncake ||
		got.TraceBlockTokens != 64 {
		t.Errorf("the trace's flags: %+v", got)
	}
	// A test suite names its jobs in the environment, so that its leak checks know their segments.
	t.Setenv("CPHICACHE_JOB_ID", "envjob")
	t.Setenv("SLURM_JOB_ID", "4242")
	if got = captureRun(t); got.JobID != "envjob" {
		t.Errorf("CPHICACHE_JOB_ID=envjob SLURM_JOB_ID=4242: job id %q, want envjob", got.JobID)
	}
}

// TestWatchdogHelpSaysItsGraceAndPoll: --watchdog-timeout's help gives the collective's grace and
// the poll's interval, the watchdog's own, since both make a job end later than the timeout alone
// says.
func TestWatchdogHelpSaysItsGraceAndPoll(t *testing.T) {
	for _, f := range (&runOptions{}).checkFlags() {
		if f.Names()[0] != "watchdog-timeout" {
			continue
		}
		usage := f.(*cli.DurationFlag).Usage
		for _, want := range []string{"plus " + spmd.CollectiveGrace.String(), "checked every " + spmd.WatchdogPollInterval.String(), "0 = off"} {
			if !strings.Contains(usage, want) {
				t.Errorf("--watchdog-timeout's help lacks %q: %s", want, usage)
			}
		}
		return
	}
	t.Fatal("no --watchdog-timeout")
}
