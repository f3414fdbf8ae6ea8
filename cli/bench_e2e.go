package cli

// `cphicache bench e2e`: the main job at several rank counts; it launches mpirun itself, so it runs
// without it.

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

type e2eOptions struct {
	npList                  cli.IntSlice
	assertEveryList         cli.Int64Slice
	repeats                 int
	mpirun, runArgs, outDir string
	timeout                 time.Duration
	out                     benchOutput

	cfg bench.E2EConfig
}

func (o *e2eOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_E2E_" + name} }
	return append([]cli.Flag{
		&cli.IntSliceFlag{
			Name:        "np-list",
			Value:       cli.NewIntSlice(1, 2, 4, 8),
			EnvVars:     env("NP_LIST"),
			Destination: &o.npList,
			Usage:       "rank counts, comma separated; one mpirun per count",
		},
		&cli.Int64SliceFlag{
			Name:        "assert-every-list",
			Value:       cli.NewInt64Slice(8, 0),
			EnvVars:     env("ASSERT_EVERY_LIST"),
			Destination: &o.assertEveryList,
			Usage:       "steps between placement asserts, comma separated; 0 = one assert at the end (the baseline of the overhead column)",
		},
		&cli.IntFlag{
			Name:        "repeats",
			Value:       3,
			EnvVars:     env("REPEATS"),
			Destination: &o.repeats,
			Usage:       "launches per configuration, interleaved; rows are medians",
		},
		&cli.StringFlag{
			Name:        "mpirun",
			Value:       "mpirun --oversubscribe --mca mpi_yield_when_idle 1",
			EnvVars:     env("MPIRUN"),
			Destination: &o.mpirun,
			Usage:       "the launcher and its flags (split at spaces); -np N is inserted after the first word",
		},
		&cli.StringFlag{
			Name:        "run-args",
			EnvVars:     env("RUN_ARGS"),
			Destination: &o.runArgs,
			Usage:       "extra `FLAGS` of cphicache run (split at spaces)",
		},
		&cli.StringFlag{
			Name:        "out-dir",
			Value:       "build/bench/e2e",
			EnvVars:     env("OUT_DIR"),
			Destination: &o.outDir,
			Usage:       "folder for each launch's report (JSON) and output (log)",
		},
		&cli.DurationFlag{
			Name:        "timeout",
			Value:       300 * time.Second,
			EnvVars:     env("TIMEOUT"),
			Destination: &o.timeout,
			Usage:       "end a launch that runs longer than this (e.g. 300s, 5m)",
		},
	}, benchOutputFlags("e2e", false, &o.out)...)
}

// before builds the config; the binary the launches run is this one.
func (o *e2eOptions) before(*cli.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.cfg = bench.E2EConfig{
		NPs:            o.npList.Value(),
		AssertEvery:    o.assertEveryList.Value(),
		Repeats:        o.repeats,
		Launcher:       strings.Fields(o.mpirun),
		Binary:         self,
		RunArgs:        strings.Fields(o.runArgs),
		OutDir:         o.outDir,
		TimeoutSeconds: o.timeout.Seconds(),
	}
	return o.cfg.Validate()
}

func benchE2ECommand() *cli.Command {
	o := &e2eOptions{}
	return &cli.Command{
		Name:         "e2e",
		Usage:        "the main job's steps per second and writing_check latency at several rank counts, placement assert on and at the end only (launches mpirun itself: do not run it under mpirun)",
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action:       func(*cli.Context) error { return benchE2E(o.cfg, &o.out) },
	}
}

func benchE2E(cfg bench.E2EConfig, out *benchOutput) error {
	meta := bench.NewMeta("e2e", version)
	meta.Set(
		"launch",
		strings.TrimSpace(
			fmt.Sprintf(
				"%s -np N ... %s run --quiet --report FILE --placement-assert-every A %s",
				cfg.Launcher[0],
				cfg.Binary,
				strings.Join(cfg.RunArgs, " "),
			),
		),
	)
	meta.Set("launcher flags", strings.Join(cfg.Launcher[1:], " "))
	meta.Set("rank counts", fmt.Sprint(cfg.NPs))
	meta.Set("assert intervals", fmt.Sprint(cfg.AssertEvery))
	meta.Set("repeats", cfg.Repeats)
	meta.Set("reports", cfg.OutDir)
	var rows []bench.E2ERow
	var runs []bench.E2ERun
	err := interruptible("the launch in flight ended", func(ctx context.Context) (err error) {
		rows, runs, err = bench.RunE2E(ctx, cfg, os.Stdout)
		return err
	})
	if err != nil {
		return err
	}
	meta.Ranks = bench.E2ERanks(runs)
	return out.write(
		meta,
		map[string]any{"rows": rows, "runs": runs},
		bench.E2EWrong(rows),
		func(w io.Writer) { bench.WriteE2ETable(w, rows) },
		nil,
	)
}
