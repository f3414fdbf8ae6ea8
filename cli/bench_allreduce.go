package cli

// `cphicache bench allreduce` (under mpirun): the step consensus's MIN all-reduce through mpi/,
// beside the cgo floor and a C MPI_Allreduce loop on the same communicator.

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/bench"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/mpi"
)

// allreduceOptions are bench allreduce's flags; Before turns them into cfg.
type allreduceOptions struct {
	minSize, maxSize                              int64
	stepFactor, iters, itersLarge, warmup, rounds int
	gapUs                                         float64
	// only the log level: the job is the world
	global globalOptions
	out    benchOutput

	cfg bench.AllreduceConfig
}

func (o *allreduceOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_ALLREDUCE_" + name} }
	return append([]cli.Flag{
		&cli.Int64Flag{
			Name:        "min-size",
			Value:       8,
			EnvVars:     env("MIN_SIZE"),
			Destination: &o.minSize,
			Usage:       "bytes: the smallest message, a power of two, 8 or more (8 bytes = 1 element)",
		},
		&cli.Int64Flag{
			Name:        "max-size",
			Value:       8 << 16,
			EnvVars:     env("MAX_SIZE"),
			Destination: &o.maxSize,
			Usage:       "bytes: the largest message, a power of two (default 2^16 elements)",
		},
		&cli.IntFlag{
			Name:        "step-factor",
			Value:       4,
			EnvVars:     env("STEP_FACTOR"),
			Destination: &o.stepFactor,
			Usage:       "each size is the previous one times this: 2 or 4",
		},
		&cli.IntFlag{
			Name:        "iters",
			Value:       1000,
			EnvVars:     env("ITERS"),
			Destination: &o.iters,
			Usage:       "timed calls per side and round, for messages up to 8 KiB",
		},
		&cli.IntFlag{
			Name:        "iters-large",
			Value:       100,
			EnvVars:     env("ITERS_LARGE"),
			Destination: &o.itersLarge,
			Usage:       "timed calls per side and round, above 8 KiB",
		},
		&cli.IntFlag{
			Name:        "warmup",
			Value:       100,
			EnvVars:     env("WARMUP"),
			Destination: &o.warmup,
			Usage:       "untimed calls before each timed loop",
		},
		&cli.IntFlag{
			Name:        "rounds",
			Value:       10,
			EnvVars:     env("ROUNDS"),
			Destination: &o.rounds,
			Usage:       "rounds per size; each times ours, the cgo floor and C, rotating which goes first",
		},
		&cli.Float64Flag{Name: "gap-us", Value: 0, EnvVars: env("GAP_US"), Destination: &o.gapUs,
			Usage: "microseconds: 0 = calls back to back, timed as a loop (OSU); more = every side spins this long and enters a barrier before every call, and each call is timed alone, as writing_check calls between other work"},
		logLevelFlag(&o.global.logLevelName, "CPHICACHE_BENCH_ALLREDUCE_LOG_LEVEL"),
	}, benchOutputFlags("allreduce", true, &o.out)...)
}

func (o *allreduceOptions) before(c *cli.Context) error {
	if err := powerOfTwo("min-size", o.minSize, 8); err != nil {
		return err
	}
	if err := powerOfTwo("max-size", o.maxSize, o.minSize); err != nil {
		return err
	}
	o.cfg = bench.AllreduceConfig{
		MinCount:        int(o.minSize / 8),
		MaxCount:        int(o.maxSize / 8),
		CountFactor:     o.stepFactor,
		Iters:           o.iters,
		ItersLarge:      o.itersLarge,
		Warmup:          o.warmup,
		Rounds:          o.rounds,
		GapMicroseconds: o.gapUs,
	}
	if err := o.cfg.Validate(); err != nil {
		return err
	}
	return o.global.check(c)
}

func benchAllreduceCommand() *cli.Command {
	o := &allreduceOptions{}
	return &cli.Command{
		Name:         "allreduce",
		Usage:        "latency of writing_check's MIN all-reduce of uint64 through mpi/, beside the cgo floor (the same call through one bare cgo call) and a C MPI_Allreduce loop on the same communicator (launch under mpirun)",
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action: func(*cli.Context) error {
			return withJob(
				o.global,
				func(job *spmd.Job) error { return benchAllreduce(job, o.cfg, &o.out) },
			)
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

func benchAllreduce(job *spmd.Job, cfg bench.AllreduceConfig, out *benchOutput) error {
	meta := bench.NewMeta("allreduce", version)
	lib, _ := mpi.LibraryVersion()
	meta.MPILibrary = lib
	meta.Set("operation", "MPI_Allreduce in place, MPI_UINT64_T, MPI_MIN (writing_check's call)")
	meta.Set(
		"communicator",
		fmt.Sprintf(
			"world, %d ranks (the cgo floor and the C side name MPI_COMM_WORLD themselves)",
			job.Topo.World.Size(),
		),
	)
	meta.Set(
		"sizes",
		fmt.Sprintf("%d to %d bytes, x%d", 8*cfg.MinCount, 8*cfg.MaxCount, cfg.CountFactor),
	)
	meta.Set(
		"iterations",
		fmt.Sprintf(
			"%d per side and round (%d above 8 KiB), %d warm-up, %d rounds",
			cfg.Iters,
			cfg.ItersLarge,
			cfg.Warmup,
			cfg.Rounds,
		),
	)
	meta.Set("waiting", waitingSetting())
	if cfg.GapMicroseconds > 0 {
		meta.Set(
			"timing",
			fmt.Sprintf(
				"each call alone, after a %g us spin and a barrier (ours and floor: time.Now, C: MPI_Wtime)",
				cfg.GapMicroseconds,
			),
		)
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
	return out.write(meta, rows, wrong, func(w io.Writer) { bench.WriteAllreduceTable(w, rows) },
		func(path string) error {
			return bench.PlotAllreduce(
				rows,
				path,
				fmt.Sprintf(
					"MIN all-reduce of uint64, %d ranks (cphicache %s)",
					len(ranks),
					version,
				),
			)
		})
}
