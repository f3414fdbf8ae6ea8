package main

// The `bench` command: the CLI of package bench (flags, their validation, one call per subcommand). How each
// number is derived is in bench/PERFORMANCE.md; `make bench` runs the full set.

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/bench"
	"github.com/cphicache/cphicache/hicache"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/mpi"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "benchmarks, each beside a reference measured in the same run: allreduce and step (under mpirun), copy, reserve, e2e",
		Description: "Output in the style of nccl-tests: a '#' header with the version, configuration and rank -> host map, " +
			"fixed-width columns with a units line, a #wrong column from validation outside the timed loops, and a non-zero " +
			"exit on any wrong result. --json FILE writes the rows for machines, --plot FILE.png draws them. " +
			"See bench/PERFORMANCE.md.",
		OnUsageError: onUsageError,
		Subcommands:  []*cli.Command{benchAllreduceCommand(), benchStepCommand(), benchCopyCommand(), benchReserveCommand(), benchE2ECommand()},
	}
}

// benchOutputFlags are --json and, where the benchmark has a plot, --plot; env vars are per subcommand so that
// one exported variable cannot make two benchmarks write the same file.
func benchOutputFlags(sub string, plot bool) []cli.Flag {
	env := "CPHICACHE_BENCH_" + strings.ToUpper(strings.ReplaceAll(sub, "-", "_")) + "_"
	flags := []cli.Flag{&cli.StringFlag{Name: "json", EnvVars: []string{env + "JSON"}, Category: "output",
		Usage: "also write the header and rows as JSON to this file"}}
	if plot {
		flags = append(flags, &cli.StringFlag{Name: "plot", EnvVars: []string{env + "PLOT"}, Category: "output",
			Usage: "also draw the rows beside the reference into this PNG file"})
	}
	return flags
}

// benchWrite prints the header and table, then writes the JSON and the plot when asked, and turns wrong results
// into the command's error.
func benchWrite(c *cli.Context, meta *bench.Meta, rows any, wrong int64, table func(io.Writer), plot func(string) error) error {
	meta.WriteHeader(os.Stdout)
	table(os.Stdout)
	fmt.Printf("# wrong results: %d\n", wrong)
	if path := c.String("json"); path != "" {
		if err := bench.WriteJSON(path, meta, rows, wrong); err != nil {
			return err
		}
	}
	if path := c.String("plot"); path != "" && plot != nil {
		if err := plot(path); err != nil {
			return err
		}
	}
	return bench.CheckWrong(meta.Benchmark, wrong)
}

func powerOfTwo(flag string, v int64, minimum int64) error {
	if v < minimum || v&(v-1) != 0 {
		return &spmd.ConfigError{Flag: flag, Reason: fmt.Sprintf("%d is not a power of two of at least %d", v, minimum)}
	}
	return nil
}

func benchAllreduceCommand() *cli.Command {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_ALLREDUCE_" + name} }
	return &cli.Command{
		Name:  "allreduce",
		Usage: "latency of writing_check's MIN all-reduce of uint64 through mpi/, beside the cgo floor (the same call through one bare cgo call) and a C MPI_Allreduce loop on the same communicator (launch under mpirun)",
		Flags: append([]cli.Flag{
			&cli.Int64Flag{Name: "min-size", Value: 8, EnvVars: env("MIN_SIZE"), Usage: "bytes: the smallest message, a power of two, 8 or more (8 bytes = 1 element)"},
			&cli.Int64Flag{Name: "max-size", Value: 8 << 16, EnvVars: env("MAX_SIZE"), Usage: "bytes: the largest message, a power of two (default 2^16 elements)"},
			&cli.IntFlag{Name: "step-factor", Value: 4, EnvVars: env("STEP_FACTOR"), Usage: "each size is the previous one times this: 2 or 4"},
			&cli.IntFlag{Name: "iters", Value: 1000, EnvVars: env("ITERS"), Usage: "timed calls per side and round, for messages up to 8 KiB"},
			&cli.IntFlag{Name: "iters-large", Value: 100, EnvVars: env("ITERS_LARGE"), Usage: "timed calls per side and round, above 8 KiB"},
			&cli.IntFlag{Name: "warmup", Value: 100, EnvVars: env("WARMUP"), Usage: "untimed calls before each timed loop"},
			&cli.IntFlag{Name: "rounds", Value: 10, EnvVars: env("ROUNDS"), Usage: "rounds per size; each times ours, the cgo floor and C, rotating which goes first"},
			&cli.Float64Flag{Name: "gap-us", Value: 0, EnvVars: env("GAP_US"),
				Usage: "microseconds: 0 = calls back to back, timed as a loop (OSU); more = every side spins this long and enters a barrier before every call, and each call is timed alone, as writing_check calls between other work"},
			&cli.StringFlag{Name: "log-level", Value: "warn", EnvVars: env("LOG_LEVEL"), Usage: "log verbosity on stderr: debug, info, warn or error"},
		}, benchOutputFlags("allreduce", true)...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			cfg := bench.AllreduceConfig{MinCount: int(c.Int64("min-size") / 8), MaxCount: int(c.Int64("max-size") / 8),
				CountFactor: c.Int("step-factor"), Iters: c.Int("iters"), ItersLarge: c.Int("iters-large"), Warmup: c.Int("warmup"), Rounds: c.Int("rounds"),
				GapMicroseconds: c.Float64("gap-us")}
			if err := powerOfTwo("min-size", c.Int64("min-size"), 8); err != nil {
				return err
			}
			if err := powerOfTwo("max-size", c.Int64("max-size"), c.Int64("min-size")); err != nil {
				return err
			}
			if err := cfg.Validate(); err != nil {
				return &spmd.ConfigError{Flag: "iters", Reason: err.Error()}
			}
			level, err := spmd.ParseLogLevel(c.String("log-level"))
			if err != nil {
				return err
			}
			return withJob(globalOptions{logLevel: level}, func(job *spmd.Job) error { return benchAllreduce(c, job, cfg) })
		},
	}
}

// waitingSetting says how every side of the all-reduce benchmark waits (mpi.YieldEnv).
func waitingSetting() string {
	if mpi.YieldWhenIdle() {
		return "MPI_Iallreduce tested with sched_yield between tests, every side (" + mpi.YieldEnv + ")"
	}
	return "the library's blocking MPI_Allreduce, every side (" + mpi.YieldEnv + ")"
}

func benchAllreduce(c *cli.Context, job *spmd.Job, cfg bench.AllreduceConfig) error {
	meta := bench.NewMeta("allreduce", version)
	lib, _ := mpi.LibraryVersion()
	meta.MPILibrary = lib
	meta.Set("operation", "MPI_Allreduce in place, MPI_UINT64_T, MPI_MIN (writing_check's call)")
	meta.Set("communicator", fmt.Sprintf("world, %d ranks (the cgo floor and the C side name MPI_COMM_WORLD themselves)", job.Topo.World.Size()))
	meta.Set("sizes", fmt.Sprintf("%d to %d bytes, x%d", 8*cfg.MinCount, 8*cfg.MaxCount, cfg.CountFactor))
	meta.Set("iterations", fmt.Sprintf("%d per side and round (%d above 8 KiB), %d warm-up, %d rounds", cfg.Iters, cfg.ItersLarge, cfg.Warmup, cfg.Rounds))
	meta.Set("waiting", waitingSetting())
	if cfg.GapMicroseconds > 0 {
		meta.Set("timing", fmt.Sprintf("each call alone, after a %g us spin and a barrier (ours and floor: time.Now, C: MPI_Wtime)", cfg.GapMicroseconds))
	} else {
		meta.Set("timing", "back to back, the loop timed as a whole with MPI_Wtime on every side (OSU)")
	}
	ranks, err := job.Topo.Gather(transport.DescribeGPU(job.Topo))
	if err != nil {
		return err
	}
	meta.Ranks = ranks
	rows, err := bench.RunAllreduce(job.Topo.World, cfg)
	if err != nil {
		return err
	}
	wrong := bench.AllreduceWrong(rows)
	if job.Topo.WorldRank != 0 {
		if wrong != 0 {
			return spmd.PeerFailedError{} // rank 0 names the cause
		}
		return nil
	}
	return benchWrite(c, meta, rows, wrong, func(w io.Writer) { bench.WriteAllreduceTable(w, rows) },
		func(path string) error {
			return bench.PlotAllreduce(rows, path, fmt.Sprintf("MIN all-reduce of uint64, %d ranks (cphicache %s)", len(ranks), version))
		})
}

func benchStepCommand() *cli.Command {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_STEP_" + name} }
	return &cli.Command{
		Name: "step",
		Usage: fmt.Sprintf("latency of one step's agreement: hicache's step consensus (one MIN all-reduce of the %d-word vector, the real call through a hicache.StepProbe) "+
			"beside the seed design's four calls per step in C (writing_check MIN of [frontier, idle], loading_check MIN of [frontier, done]: 2 uint64 words each; "+
			"digest MIN and digest MAX: 1 word each), a C loop of the one fused call, and the fused call from Go through one bare cgo call (launch under mpirun, 2 ranks or more)",
			hicache.ConsensusVectorWords),
		Flags: append([]cli.Flag{
			&cli.IntFlag{Name: "iters", Value: 2000, EnvVars: env("ITERS"), Usage: "timed steps per side and round"},
			&cli.IntFlag{Name: "warmup", Value: 2000, EnvVars: env("WARMUP"), Usage: "untimed steps before each timed loop (a few ms at np 2: a Go loop right after a C loop needs that long to settle)"},
			&cli.IntFlag{Name: "rounds", Value: 21, EnvVars: env("ROUNDS"), Usage: "timed rounds, after one untimed round; each times every side, rotating which goes first; each rank reports its median round"},
			&cli.Float64Flag{Name: "gap-us", Value: 0, EnvVars: env("GAP_US"),
				Usage: "microseconds: 0 = steps back to back, timed as a loop; more = every side spins this long and enters a barrier before every step, and each step is timed alone, as a run agrees between other work"},
			&cli.StringFlag{Name: "log-level", Value: "warn", EnvVars: env("LOG_LEVEL"), Usage: "log verbosity on stderr: debug, info, warn or error"},
		}, benchOutputFlags("step", false)...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			cfg := bench.StepConfig{Iters: c.Int("iters"), Warmup: c.Int("warmup"), Rounds: c.Int("rounds"), GapMicroseconds: c.Float64("gap-us")}
			if err := cfg.Validate(); err != nil {
				return &spmd.ConfigError{Flag: "iters", Reason: err.Error()}
			}
			level, err := spmd.ParseLogLevel(c.String("log-level"))
			if err != nil {
				return err
			}
			return withJob(globalOptions{logLevel: level}, func(job *spmd.Job) error { return benchStep(c, job, cfg) })
		},
	}
}

func benchStep(c *cli.Context, job *spmd.Job, cfg bench.StepConfig) error {
	meta := bench.NewMeta("step", version)
	lib, _ := mpi.LibraryVersion()
	meta.MPILibrary = lib
	meta.Set("ours", fmt.Sprintf("hicache's step consensus: MPI_Allreduce in place of %d uint64 words, MPI_MIN (tag, ^tag, error, write frontier, write idle, load frontier, load done, digest, ^digest)", hicache.ConsensusVectorWords))
	meta.Set("C-seed", "the seed design's step in C: MPI_Allreduce MIN of 2 uint64 words (writing_check: frontier, idle), MIN of 2 (loading_check: frontier, done), MIN of 1 (digest), MAX of 1 (digest)")
	meta.Set("C-fused", fmt.Sprintf("one MPI_Allreduce MIN of %d uint64 words per step in C", hicache.ConsensusVectorWords))
	meta.Set("communicator", fmt.Sprintf("world, %d ranks, as the CP group (the C sides name MPI_COMM_WORLD themselves)", job.Topo.World.Size()))
	meta.Set("iterations", fmt.Sprintf("%d steps per side and round, %d warm-up, %d rounds after an untimed one", cfg.Iters, cfg.Warmup, cfg.Rounds))
	if cfg.GapMicroseconds > 0 {
		meta.Set("timing", fmt.Sprintf("each step alone, after a %g us spin and a barrier (Go sides: time.Now, C: MPI_Wtime)", cfg.GapMicroseconds))
	} else {
		meta.Set("timing", "back to back, the loop timed as a whole with MPI_Wtime on every side")
	}
	meta.Set("validation", "every step of every side checks its agreed words against what the votes imply (inside the timed loop: a step checks its agreement)")
	ranks, err := job.Topo.Gather(transport.DescribeGPU(job.Topo))
	if err != nil {
		return err
	}
	meta.Ranks = ranks
	rows, err := bench.RunStep(job.Topo.World, cfg)
	if err != nil {
		return err
	}
	wrong := bench.StepWrong(rows)
	if job.Topo.WorldRank != 0 {
		if wrong != 0 {
			return spmd.PeerFailedError{} // rank 0 names the cause
		}
		return nil
	}
	return benchWrite(c, meta, rows, wrong, func(w io.Writer) { bench.WriteStepTable(w, rows) }, nil)
}

func benchCopyCommand() *cli.Command {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_COPY_" + name} }
	return &cli.Command{
		Name:  "copy",
		Usage: "page gather (D2H) and scatter (H2D) of kernels.HostEngine in both layouts, beside a memcpy of the same bytes (one rank, no mpirun needed)",
		Flags: append([]cli.Flag{
			&cli.Int64SliceFlag{Name: "part-sizes", Value: cli.NewInt64Slice(4<<10, 16<<10, 64<<10, 256<<10, 1<<20), EnvVars: env("PART_SIZES"),
				Usage: "bytes of one (page, layer, payload) part, comma separated"},
			&cli.Int64Flag{Name: "total-bytes", Value: 32 << 20, EnvVars: env("TOTAL_BYTES"), Usage: "bytes one rank copies per iteration (every layer and payload of one object)"},
			&cli.IntFlag{Name: "layers", Value: 4, EnvVars: env("LAYERS"), Usage: "layers of the object; each is one Gather or Scatter call, as in hicache"},
			&cli.IntFlag{Name: "payloads", Value: 2, EnvVars: env("PAYLOADS"), Usage: "payloads per layer: 2 = K and V, 1 = an MLA latent"},
			&cli.IntFlag{Name: "cp-ranks", Value: 1, EnvVars: env("CP_RANKS"), Usage: "ranks sharing the slab; the benchmark copies CP rank 0's parts (page_first strides over the others)"},
			&cli.IntFlag{Name: "workers", Value: 1, EnvVars: env("WORKERS"), Usage: "copy goroutines of the engine and of the memcpy reference alike"},
			&cli.IntFlag{Name: "iters", Value: 3, EnvVars: env("ITERS"), Usage: "timed iterations per side and round"},
			&cli.IntFlag{Name: "rounds", Value: 10, EnvVars: env("ROUNDS"), Usage: "rounds per case; each times ours and memcpy, alternating which goes first; the median round is reported"},
		}, benchOutputFlags("copy", true)...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			cfg := bench.CopyConfig{PartBytes: c.Int64Slice("part-sizes"), TotalBytes: c.Int64("total-bytes"), Layers: c.Int("layers"),
				Payloads: c.Int("payloads"), CPSize: c.Int("cp-ranks"), Workers: c.Int("workers"), Iters: c.Int("iters"), Rounds: c.Int("rounds")}
			if err := cfg.Validate(); err != nil {
				return &spmd.ConfigError{Flag: "part-sizes", Reason: err.Error()}
			}
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
			return benchWrite(c, meta, rows, bench.CopyWrong(rows), func(w io.Writer) { bench.WriteCopyTable(w, rows) },
				func(path string) error {
					return bench.PlotCopy(rows, path, fmt.Sprintf("page copies, %d MiB per iteration, %d worker(s) (cphicache %s)", cfg.TotalBytes>>20, cfg.Workers, version))
				})
		},
	}
}

func benchReserveCommand() *cli.Command {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_RESERVE_" + name} }
	return &cli.Command{
		Name:  "reserve",
		Usage: "allocator ops per second (Reserve + MarkObjectCommitted + Release) against pool size and object size (one rank)",
		Flags: append([]cli.Flag{
			&cli.IntSliceFlag{Name: "slots-log2", Value: cli.NewIntSlice(10, 12, 14, 16, 18, 20, 22, 24), EnvVars: env("SLOTS_LOG2"),
				Usage: "pool sizes as log2 of the slots, comma separated; each pool starts half full"},
			&cli.IntSliceFlag{Name: "pages", Value: cli.NewIntSlice(1, 16, 256), EnvVars: env("PAGES"), Usage: "object sizes in pages, comma separated"},
			&cli.Float64Flag{Name: "min-seconds", Value: 0.2, EnvVars: env("MIN_SECONDS"), Usage: "seconds: each cell runs batches of 1024 ops until this much time has passed, over 5 rounds that visit every cell"},
		}, benchOutputFlags("reserve", false)...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			cfg := bench.ReserveConfig{SlotsLog2: c.IntSlice("slots-log2"), Pages: c.IntSlice("pages"), MinSeconds: c.Float64("min-seconds")}
			if err := cfg.Validate(); err != nil {
				return &spmd.ConfigError{Flag: "slots-log2", Reason: err.Error()}
			}
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
			return benchWrite(c, meta, rows, bench.ReserveWrong(rows), func(w io.Writer) { bench.WriteReserveTable(w, rows) }, nil)
		},
	}
}

func benchE2ECommand() *cli.Command {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_E2E_" + name} }
	return &cli.Command{
		Name:  "e2e",
		Usage: "the main job's steps per second and writing_check latency at several rank counts, placement assert on and at the end only (launches mpirun itself: do not run it under mpirun)",
		Flags: append([]cli.Flag{
			&cli.IntSliceFlag{Name: "np-list", Value: cli.NewIntSlice(1, 2, 4, 8), EnvVars: env("NP_LIST"), Usage: "rank counts, comma separated; one mpirun per count"},
			&cli.Int64SliceFlag{Name: "assert-every-list", Value: cli.NewInt64Slice(8, 0), EnvVars: env("ASSERT_EVERY_LIST"),
				Usage: "steps between placement asserts, comma separated; 0 = one assert at the end (the baseline of the overhead column)"},
			&cli.IntFlag{Name: "repeats", Value: 3, EnvVars: env("REPEATS"), Usage: "launches per configuration, interleaved; rows are medians"},
			&cli.StringFlag{Name: "mpirun", Value: "mpirun --oversubscribe --mca mpi_yield_when_idle 1", EnvVars: env("MPIRUN"),
				Usage: "the launcher and its flags (split at spaces); -np N is inserted after the first word"},
			&cli.StringFlag{Name: "run-args", EnvVars: env("RUN_ARGS"), Usage: "extra flags of `cphicache run` (split at spaces)"},
			&cli.StringFlag{Name: "out-dir", Value: "build/bench/e2e", EnvVars: env("OUT_DIR"), Usage: "folder for each launch's report (JSON) and output (log)"},
			&cli.DurationFlag{Name: "timeout", Value: 300 * time.Second, EnvVars: env("TIMEOUT"), Usage: "end a launch that runs longer than this (e.g. 300s, 5m)"},
		}, benchOutputFlags("e2e", false)...),
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			self, err := os.Executable()
			if err != nil {
				return err
			}
			cfg := bench.E2EConfig{NPs: c.IntSlice("np-list"), AssertEvery: c.Int64Slice("assert-every-list"), Repeats: c.Int("repeats"),
				Launcher: strings.Fields(c.String("mpirun")), Binary: self, RunArgs: strings.Fields(c.String("run-args")),
				OutDir: c.String("out-dir"), TimeoutSeconds: c.Duration("timeout").Seconds()}
			if err := cfg.Validate(); err != nil {
				return &spmd.ConfigError{Flag: "np-list", Reason: err.Error()}
			}
			meta := bench.NewMeta("e2e", version)
			meta.Set("launch", strings.TrimSpace(fmt.Sprintf("%s -np N ... %s run --quiet --report FILE --placement-assert-every A %s", cfg.Launcher[0], self, strings.Join(cfg.RunArgs, " "))))
			meta.Set("launcher flags", strings.Join(cfg.Launcher[1:], " "))
			meta.Set("rank counts", fmt.Sprint(cfg.NPs))
			meta.Set("assert intervals", fmt.Sprint(cfg.AssertEvery))
			meta.Set("repeats", cfg.Repeats)
			meta.Set("reports", cfg.OutDir)
			rows, runs, err := bench.RunE2E(cfg, os.Stdout)
			if err != nil {
				return err
			}
			meta.Ranks = bench.E2ERanks(runs)
			return benchWrite(c, meta, map[string]any{"rows": rows, "runs": runs}, bench.E2EWrong(rows), func(w io.Writer) { bench.WriteE2ETable(w, rows) }, nil)
		},
	}
}
