package cli

// bench replay: one trace in four configurations (L1 only, L2 only, L2 + L3 empty, L2 + L3 filled),
// each launch its own mpirun (bench replay launches them: do not run it under mpirun).

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/bench"
)

type replayOptions struct {
	trace, mpirun, runArgs, l3RunArgs, l3Parent, outDir string
	servingArgs                                         string
	np, repeats, plainRounds                            int
	timeout                                             time.Duration
	out                                                 benchOutput

	cfg bench.ReplayConfig
}

func (o *replayOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_REPLAY_" + name} }
	return append([]cli.Flag{
		&cli.StringFlag{Name: "trace", EnvVars: env("TRACE"), Destination: &o.trace,
			Usage: "the JSON Lines trace every launch replays (run's --trace), required; the repository holds a 200-request excerpt of Mooncake's synthetic trace, hicache/workload/testdata/mooncake/synthetic_first200.jsonl"},
		&cli.IntFlag{
			Name:        "np",
			Value:       8,
			EnvVars:     env("NP"),
			Destination: &o.np,
			Usage:       "ranks of every launch (mpirun -np)",
		},
		&cli.IntFlag{Name: "repeats", Value: 3, EnvVars: env("REPEATS"), Destination: &o.repeats,
			Usage: "launches per configuration; each repeat runs L2 only, then L2 + L3 over a fresh directory, then L2 + L3 over that directory again; rows are medians"},
		&cli.StringFlag{
			Name:        "mpirun",
			Value:       "mpirun --oversubscribe --mca mpi_yield_when_idle 1",
			EnvVars:     env("MPIRUN"),
			Destination: &o.mpirun,
			Usage:       "the launcher and its flags (split at spaces); -np N is inserted after the first word (OpenMPI as root also needs OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 in the environment, as make exports them)",
		},
		&cli.StringFlag{Name: "run-args", Value: bench.DefaultReplayRunArgs, EnvVars: env("RUN_ARGS"), Destination: &o.runArgs,
			Usage: "`FLAGS` of cphicache run for every launch (split at spaces; arguments after -- are added to them); not --trace, --l3-dir, --report or --quiet, which the benchmark sets"},
		&cli.StringFlag{
			Name:        "serving-args",
			Value:       bench.DefaultReplayServingArgs,
			EnvVars:     env("SERVING_ARGS"),
			Destination: &o.servingArgs,
			Usage:       "the serving clock's `FLAGS` of cphicache run for every launch (split at spaces): the rows' TTFT and the targets on it are MODELLED by them; \"\" replays without the clock, as fast as the machine allows",
		},
		&cli.StringFlag{Name: "l3-run-args", Value: bench.DefaultReplayL3RunArgs, EnvVars: env("L3_RUN_ARGS"), Destination: &o.l3RunArgs,
			Usage: "`FLAGS` of cphicache run for the L3 launches only (--l3-bytes, --l3-block-tokens, ...: the L2-only launches would refuse them)"},
		&cli.StringFlag{
			Name:        "l3-parent",
			Value:       os.TempDir(),
			EnvVars:     env("L3_PARENT"),
			Destination: &o.l3Parent,
			Usage:       "an existing directory on the filesystem to measure: each repeat's L3 directory is made in it, fresh, and removed after the repeat",
		},
		&cli.StringFlag{
			Name:        "out-dir",
			Value:       "build/bench/replay",
			EnvVars:     env("OUT_DIR"),
			Destination: &o.outDir,
			Usage:       "folder for each launch's report (JSON) and output (log)",
		},
		&cli.DurationFlag{
			Name:        "timeout",
			Value:       20 * time.Minute,
			EnvVars:     env("TIMEOUT"),
			Destination: &o.timeout,
			Usage:       "end a launch that runs longer than this (e.g. 600s, 20m)",
		},
		&cli.IntFlag{
			Name:        "plain-rounds",
			Value:       21,
			EnvVars:     env("PLAIN_ROUNDS"),
			Destination: &o.plainRounds,
			Usage:       "timed rounds of the plain read of one prefetch's bytes, the prefetch wait's reference (the median is reported)",
		},
	}, benchOutputFlags("replay", false, &o.out)...)
}

// before builds the config; the binary the launches run is this one.
func (o *replayOptions) before(c *cli.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.cfg = bench.ReplayConfig{
		Trace:    o.trace,
		NP:       o.np,
		Repeats:  o.repeats,
		Launcher: strings.Fields(o.mpirun),
		Binary:   self,
		RunArgs: append(
			strings.Fields(o.runArgs),
			c.Args().Slice()...),
		L3RunArgs:   strings.Fields(o.l3RunArgs),
		ServingArgs: strings.Fields(o.servingArgs),
		L3Parent:    o.l3Parent,
		OutDir:      o.outDir,
		TimeoutSec:  o.timeout.Seconds(),
		PlainRounds: o.plainRounds,
	}
	return o.cfg.Validate()
}

func benchReplayCommand() *cli.Command {
	o := &replayOptions{}
	return &cli.Command{
		Name:         "replay",
		Usage:        "one trace replayed with L1 alone, with the L2, with an L3 over an empty directory and over the filled one, alternating, median of --repeats each: on the serving clock the MODELLED time to first token (p50, p99), prompt tokens/s and the machinery's cost on that clock (TTFT over ideal), with their targets; walls, computed share, L3 bytes, prefetch waits (launches mpirun itself: do not run it under mpirun)",
		ArgsUsage:    "[-- RUN FLAGS...]",
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action:       func(*cli.Context) error { return benchReplay(o.cfg, &o.out) },
	}
}

func benchReplay(cfg bench.ReplayConfig, out *benchOutput) error {
	meta := bench.NewMeta("replay", version)
	meta.Set(
		"launch",
		strings.Join(
			append(
				[]string{
					cfg.Launcher[0],
					"-np",
					fmt.Sprint(cfg.NP),
					"...",
					cfg.Binary,
					"run --quiet --report FILE --trace",
					cfg.Trace,
				},
				cfg.RunArgs...),
			" ",
		),
	)
	meta.Set(
		"serving clock",
		strings.Join(cfg.ServingArgs, " ")+" (MODELLED: docs/SERVING.md, docs/PREFILL.md)",
	)
	meta.Set("L1-only launches add", "--l2-slots 1")
	meta.Set(
		"L3 launches add",
		strings.Join(append([]string{"--l3-dir DIR"}, cfg.L3RunArgs...), " "),
	)
	meta.Set("launcher flags", strings.Join(cfg.Launcher[1:], " "))
	meta.Set(
		"configurations",
		"each repeat: L1-only (an L2 of one slot), L2-only, then L3-empty (a fresh directory), then L3-filled (the directory L3-empty just filled)",
	)
	meta.Set("repeats", cfg.Repeats)
	meta.Set("l3 parent", fmt.Sprintf("%s (%s)", cfg.L3Parent, bench.FilesystemType(cfg.L3Parent)))
	meta.Set("reports", cfg.OutDir)
	var res *bench.ReplayResult
	err := interruptible(
		"the launch in flight ended and the L3 directories under "+cfg.L3Parent+" removed",
		func(ctx context.Context) (err error) {
			res, err = bench.RunReplay(ctx, cfg, os.Stdout)
			return err
		},
	)
	if err != nil {
		return err
	}
	meta.Ranks = bench.ReplayRanks(res.Runs)
	return out.write(
		meta,
		res,
		bench.ReplayWrong(res),
		func(w io.Writer) { bench.WriteReplayTable(w, res) },
		nil,
	)
}
