package cli

// bench copy, reserve and e2e: the benchmarks that run on one rank (e2e launches mpirun itself). As everywhere,
// flags go into an options struct, Before builds and checks the package's config, Action runs it.

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

type copyOptions struct {
	partSizes                                         cli.Int64Slice
	totalBytes                                        int64
	layers, payloads, cpRanks, workers, iters, rounds int
	out                                               benchOutput

	cfg bench.CopyConfig
}

func (o *copyOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_COPY_" + name} }
	return append([]cli.Flag{
		&cli.Int64SliceFlag{Name: "part-sizes", Value: cli.NewInt64Slice(4<<10, 16<<10, 64<<10, 256<<10, 1<<20), EnvVars: env("PART_SIZES"),
			Destination: &o.partSizes, Usage: "bytes of one (page, layer, payload) part, comma separated"},
		&cli.Int64Flag{Name: "total-bytes", Value: 32 << 20, EnvVars: env("TOTAL_BYTES"), Destination: &o.totalBytes, Usage: "bytes one rank copies per iteration (every layer and payload of one object)"},
		&cli.IntFlag{Name: "layers", Value: 4, EnvVars: env("LAYERS"), Destination: &o.layers, Usage: "layers of the object; each is one Gather or Scatter call, as in hicache"},
		&cli.IntFlag{Name: "payloads", Value: 2, EnvVars: env("PAYLOADS"), Destination: &o.payloads, Usage: "payloads per layer: 2 = K and V, 1 = an MLA latent"},
		&cli.IntFlag{Name: "cp-ranks", Value: 1, EnvVars: env("CP_RANKS"), Destination: &o.cpRanks, Usage: "ranks sharing the slab; the benchmark copies CP rank 0's parts (page_first strides over the others)"},
		&cli.IntFlag{Name: "workers", Value: 1, EnvVars: env("WORKERS"), Destination: &o.workers, Usage: "copy goroutines of the engine and of the memcpy reference alike"},
		&cli.IntFlag{Name: "iters", Value: 3, EnvVars: env("ITERS"), Destination: &o.iters, Usage: "timed iterations per side and round"},
		&cli.IntFlag{Name: "rounds", Value: 10, EnvVars: env("ROUNDS"), Destination: &o.rounds, Usage: "rounds per case; each times ours and memcpy, alternating which goes first; the median round is reported"},
	}, benchOutputFlags("copy", true, &o.out)...)
}

func (o *copyOptions) before(*cli.Context) error {
	o.cfg = bench.CopyConfig{PartBytes: o.partSizes.Value(), TotalBytes: o.totalBytes, Layers: o.layers, Payloads: o.payloads,
		CPSize: o.cpRanks, Workers: o.workers, Iters: o.iters, Rounds: o.rounds}
	return flagError(o.cfg.Validate())
}

func benchCopyCommand() *cli.Command {
	o := &copyOptions{}
	return &cli.Command{
		Name:         "copy",
		Usage:        "page gather (D2H) and scatter (H2D) of kernels.HostEngine in both layouts, beside a memcpy of the same bytes (one rank, no mpirun needed)",
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action:       func(*cli.Context) error { return benchCopy(o.cfg, &o.out) },
	}
}

func benchCopy(cfg bench.CopyConfig, out *benchOutput) error {
	meta := bench.NewMeta("copy", version)
	meta.Set("ours", "kernels.HostEngine Gather (D2H) / Scatter (H2D), one call per layer, spans from pool.Geometry.PartOffset")
	meta.Set("reference", "copy() of one contiguous buffer of the same total bytes, split over the same workers")
	meta.Set("device layout", "[layer][payload][page], pages ascending")
	meta.Set("part sizes", fmt.Sprint(cfg.PartBytes))
	meta.Set("object", fmt.Sprintf("%d bytes per iteration, %d layers x %d payloads, CP rank 0 of %d", cfg.TotalBytes, cfg.Layers, cfg.Payloads, cfg.CPSize))
	meta.Set("workers", cfg.Workers)
	meta.Set("iterations", fmt.Sprintf("%d per side and round, %d rounds, 1 untimed first", cfg.Iters, cfg.Rounds))
	meta.SingleRank()
	rows, err := bench.RunCopy(cfg)
	if err != nil {
		return err
	}
	return out.write(meta, rows, bench.CopyWrong(rows), func(w io.Writer) { bench.WriteCopyTable(w, rows) },
		func(path string) error {
			return bench.PlotCopy(rows, path, fmt.Sprintf("page copies, %d MiB per iteration, %d worker(s) (cphicache %s)", cfg.TotalBytes>>20, cfg.Workers, version))
		})
}

type reserveOptions struct {
	slotsLog2, pages cli.IntSlice
	minSeconds       float64
	out              benchOutput

	cfg bench.ReserveConfig
}

func (o *reserveOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_RESERVE_" + name} }
	return append([]cli.Flag{
		&cli.IntSliceFlag{Name: "slots-log2", Value: cli.NewIntSlice(10, 12, 14, 16, 18, 20, 22, 24), EnvVars: env("SLOTS_LOG2"), Destination: &o.slotsLog2,
			Usage: "pool sizes as log2 of the slots, comma separated; each pool starts half full"},
		&cli.IntSliceFlag{Name: "pages", Value: cli.NewIntSlice(1, 16, 256), EnvVars: env("PAGES"), Destination: &o.pages, Usage: "object sizes in pages, comma separated"},
		&cli.Float64Flag{Name: "min-seconds", Value: 0.2, EnvVars: env("MIN_SECONDS"), Destination: &o.minSeconds, Usage: "seconds: each cell runs batches of 1024 ops until this much time has passed, over 5 rounds that visit every cell"},
	}, benchOutputFlags("reserve", false, &o.out)...)
}

func (o *reserveOptions) before(*cli.Context) error {
	o.cfg = bench.ReserveConfig{SlotsLog2: o.slotsLog2.Value(), Pages: o.pages.Value(), MinSeconds: o.minSeconds}
	return flagError(o.cfg.Validate())
}

func benchReserveCommand() *cli.Command {
	o := &reserveOptions{}
	return &cli.Command{
		Name:         "reserve",
		Usage:        "allocator ops per second (Reserve + MarkObjectCommitted + Release) against pool size and object size (one rank)",
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action:       func(*cli.Context) error { return benchReserve(o.cfg, &o.out) },
	}
}

func benchReserve(cfg bench.ReserveConfig, out *benchOutput) error {
	meta := bench.NewMeta("reserve", version)
	meta.Set("op", "Reserve + MarkObjectCommitted + Release of one object, half the pool free")
	meta.Set("geometry", "cp 8, 1 layer, 2 payloads, slabs of 2^20 slots (as pool/bench_test.go)")
	meta.Set("pool sizes (log2 slots)", fmt.Sprint(cfg.SlotsLog2))
	meta.Set("object sizes (pages)", fmt.Sprint(cfg.Pages))
	meta.Set("time per cell", fmt.Sprintf("at least %g s, in 5 rounds; every round visits every cell in rotating order, median round reported", cfg.MinSeconds))
	meta.SingleRank()
	rows, err := bench.RunReserve(cfg)
	if err != nil {
		return err
	}
	return out.write(meta, rows, bench.ReserveWrong(rows), func(w io.Writer) { bench.WriteReserveTable(w, rows) }, nil)
}

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
		&cli.IntSliceFlag{Name: "np-list", Value: cli.NewIntSlice(1, 2, 4, 8), EnvVars: env("NP_LIST"), Destination: &o.npList, Usage: "rank counts, comma separated; one mpirun per count"},
		&cli.Int64SliceFlag{Name: "assert-every-list", Value: cli.NewInt64Slice(8, 0), EnvVars: env("ASSERT_EVERY_LIST"), Destination: &o.assertEveryList,
			Usage: "steps between placement asserts, comma separated; 0 = one assert at the end (the baseline of the overhead column)"},
		&cli.IntFlag{Name: "repeats", Value: 3, EnvVars: env("REPEATS"), Destination: &o.repeats, Usage: "launches per configuration, interleaved; rows are medians"},
		&cli.StringFlag{Name: "mpirun", Value: "mpirun --oversubscribe --mca mpi_yield_when_idle 1", EnvVars: env("MPIRUN"), Destination: &o.mpirun,
			Usage: "the launcher and its flags (split at spaces); -np N is inserted after the first word"},
		&cli.StringFlag{Name: "run-args", EnvVars: env("RUN_ARGS"), Destination: &o.runArgs, Usage: "extra flags of `cphicache run` (split at spaces)"},
		&cli.StringFlag{Name: "out-dir", Value: "build/bench/e2e", EnvVars: env("OUT_DIR"), Destination: &o.outDir, Usage: "folder for each launch's report (JSON) and output (log)"},
		&cli.DurationFlag{Name: "timeout", Value: 300 * time.Second, EnvVars: env("TIMEOUT"), Destination: &o.timeout, Usage: "end a launch that runs longer than this (e.g. 300s, 5m)"},
	}, benchOutputFlags("e2e", false, &o.out)...)
}

// before builds the config; the binary the launches run is this one.
func (o *e2eOptions) before(*cli.Context) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o.cfg = bench.E2EConfig{NPs: o.npList.Value(), AssertEvery: o.assertEveryList.Value(), Repeats: o.repeats,
		Launcher: strings.Fields(o.mpirun), Binary: self, RunArgs: strings.Fields(o.runArgs),
		OutDir: o.outDir, TimeoutSeconds: o.timeout.Seconds()}
	return flagError(o.cfg.Validate())
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
	meta.Set("launch", strings.TrimSpace(fmt.Sprintf("%s -np N ... %s run --quiet --report FILE --placement-assert-every A %s", cfg.Launcher[0], cfg.Binary, strings.Join(cfg.RunArgs, " "))))
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
	return out.write(meta, map[string]any{"rows": rows, "runs": runs}, bench.E2EWrong(rows), func(w io.Writer) { bench.WriteE2ETable(w, rows) }, nil)
}
