package cli

// bench step: one step's agreement, ours beside four separate calls in C (under mpirun). Flags go
// into stepOptions; Before builds and checks bench.StepConfig.

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/bench"
	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/mpi"
)

type stepOptions struct {
	iters, warmup, rounds int
	gapUs                 float64
	global                globalOptions // only the log level: the job is the world
	out                   benchOutput

	cfg bench.StepConfig
}

func (o *stepOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_STEP_" + name} }
	return append([]cli.Flag{
		&cli.IntFlag{
			Name:        "iters",
			Value:       2000,
			EnvVars:     env("ITERS"),
			Destination: &o.iters,
			Usage:       "timed steps per side and round",
		},
		&cli.IntFlag{
			Name:        "warmup",
			Value:       2000,
			EnvVars:     env("WARMUP"),
			Destination: &o.warmup,
			Usage:       "untimed steps before each timed loop (a few ms at np 2: a Go loop right after a C loop needs that long to settle)",
		},
		&cli.IntFlag{
			Name:        "rounds",
			Value:       21,
			EnvVars:     env("ROUNDS"),
			Destination: &o.rounds,
			Usage:       "timed rounds, after one untimed round; each times every side, rotating which goes first; each rank reports its median round",
		},
		&cli.Float64Flag{Name: "gap-us", Value: 0, EnvVars: env("GAP_US"), Destination: &o.gapUs,
			Usage: "microseconds: 0 = steps back to back, timed as a loop; more = every side spins this long and enters a barrier before every step, and each step is timed alone, as a run agrees between other work"},
		logLevelFlag(&o.global.logLevelName, "CPHICACHE_BENCH_STEP_LOG_LEVEL"),
	}, benchOutputFlags("step", false, &o.out)...)
}

func (o *stepOptions) before(c *cli.Context) error {
	o.cfg = bench.StepConfig{
		Iters:           o.iters,
		Warmup:          o.warmup,
		Rounds:          o.rounds,
		GapMicroseconds: o.gapUs,
	}
	if err := o.cfg.Validate(); err != nil {
		return err
	}
	return o.global.check(c)
}

func benchStepCommand() *cli.Command {
	o := &stepOptions{}
	return &cli.Command{
		Name: "step",
		Usage: fmt.Sprintf(
			"latency of one step's agreement: hicache's step consensus (one MIN all-reduce of the %d-word vector, the real call through a runner.StepProbe) "+
				"beside four separate calls per step in C, one all-reduce per question (C-seed: writing_check MIN of [frontier, idle], loading_check MIN of [frontier, done]: 2 uint64 words each; "+
				"digest MIN and digest MAX: 1 word each), a C loop of the one fused call, and the fused call from Go through one bare cgo call (launch under mpirun, 2 ranks or more)",
			cache.VectorWords,
		),
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action: func(*cli.Context) error {
			return withJob(
				o.global,
				func(job *spmd.Job) error { return benchStep(job, o.cfg, &o.out) },
			)
		},
	}
}

func benchStep(job *spmd.Job, cfg bench.StepConfig, out *benchOutput) error {
	meta := bench.NewMeta("step", version)
	lib, _ := mpi.LibraryVersion()
	meta.MPILibrary = lib
	meta.Set(
		"ours",
		fmt.Sprintf(
			"hicache's step consensus: MPI_Allreduce in place of %d uint64 words, MPI_MIN (tag, ^tag, error, write frontier, write idle, load frontier, load done, digest, ^digest)",
			cache.VectorWords,
		),
	)
	meta.Set(
		"C-seed",
		"four separate calls a step in C: MPI_Allreduce MIN of 2 uint64 words (writing_check: frontier, idle), MIN of 2 (loading_check: frontier, done), MIN of 1 (digest), MAX of 1 (digest)",
	)
	meta.Set(
		"C-fused",
		fmt.Sprintf("one MPI_Allreduce MIN of %d uint64 words per step in C", cache.VectorWords),
	)
	meta.Set(
		"communicator",
		fmt.Sprintf(
			"world, %d ranks, as the CP group (the C sides name MPI_COMM_WORLD themselves)",
			job.Topo.World.Size(),
		),
	)
	meta.Set(
		"iterations",
		fmt.Sprintf(
			"%d steps per side and round, %d warm-up, %d rounds after an untimed one",
			cfg.Iters,
			cfg.Warmup,
			cfg.Rounds,
		),
	)
	if cfg.GapMicroseconds > 0 {
		meta.Set(
			"timing",
			fmt.Sprintf(
				"each step alone, after a %g us spin and a barrier (Go sides: time.Now, C: MPI_Wtime)",
				cfg.GapMicroseconds,
			),
		)
	} else {
		meta.Set("timing", "back to back, the loop timed as a whole with MPI_Wtime on every side")
	}
	meta.Set(
		"validation",
		"every step of every side checks its agreed words against what the votes imply (inside the timed loop: a step checks its agreement)",
	)
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
	return out.write(meta, rows, wrong, func(w io.Writer) { bench.WriteStepTable(w, rows) }, nil)
}
