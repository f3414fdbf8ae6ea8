package cli

// `cphicache bench copy` (one rank): page gather and scatter beside a memcpy of the same bytes. As
// everywhere, flags go into an options struct, Before builds and checks the package's config,
// Action runs it.

import (
	"fmt"
	"io"

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
		&cli.Int64SliceFlag{
			Name:        "part-sizes",
			Value:       cli.NewInt64Slice(4<<10, 16<<10, 64<<10, 256<<10, 1<<20),
			EnvVars:     env("PART_SIZES"),
			Destination: &o.partSizes,
			Usage:       "bytes of one (page, layer, payload) part, comma separated",
		},
		&cli.Int64Flag{
			Name:        "total-bytes",
			Value:       32 << 20,
			EnvVars:     env("TOTAL_BYTES"),
			Destination: &o.totalBytes,
			Usage:       "bytes one rank copies per iteration (every layer and payload of one object)",
		},
		&cli.IntFlag{
			Name:        "layers",
			Value:       4,
			EnvVars:     env("LAYERS"),
			Destination: &o.layers,
			Usage:       "layers of the object; each is one Gather or Scatter call, as in hicache",
		},
		&cli.IntFlag{
			Name:        "payloads",
			Value:       2,
			EnvVars:     env("PAYLOADS"),
			Destination: &o.payloads,
			Usage:       "payloads per layer: 2 = K and V, 1 = an MLA latent",
		},
		&cli.IntFlag{
			Name:        "cp-ranks",
			Value:       1,
			EnvVars:     env("CP_RANKS"),
			Destination: &o.cpRanks,
			Usage:       "ranks sharing the slab; the benchmark copies CP rank 0's parts (page_first strides over the others)",
		},
		&cli.IntFlag{
			Name:        "workers",
			Value:       1,
			EnvVars:     env("WORKERS"),
			Destination: &o.workers,
			Usage:       "copy goroutines of the engine and of the memcpy reference alike",
		},
		&cli.IntFlag{
			Name:        "iters",
			Value:       3,
			EnvVars:     env("ITERS"),
			Destination: &o.iters,
			Usage:       "timed iterations per side and round",
		},
		&cli.IntFlag{
			Name:        "rounds",
			Value:       10,
			EnvVars:     env("ROUNDS"),
			Destination: &o.rounds,
			Usage:       "rounds per case; each times ours and memcpy, alternating which goes first; the median round is reported",
		},
	}, benchOutputFlags("copy", true, &o.out)...)
}

func (o *copyOptions) before(*cli.Context) error {
	o.cfg = bench.CopyConfig{
		PartBytes:  o.partSizes.Value(),
		TotalBytes: o.totalBytes,
		Layers:     o.layers,
		Payloads:   o.payloads,
		CPSize:     o.cpRanks,
		Workers:    o.workers,
		Iters:      o.iters,
		Rounds:     o.rounds,
	}
	return o.cfg.Validate()
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
	meta.Set(
		"ours",
		"kernels.HostEngine Gather (D2H) / Scatter (H2D), one call per layer, spans from pool.Geometry.PartOffset",
	)
	meta.Set(
		"reference",
		"copy() of one contiguous buffer of the same total bytes, split over the same workers",
	)
	meta.Set("device layout", "[layer][payload][page], pages ascending")
	meta.Set("part sizes", fmt.Sprint(cfg.PartBytes))
	meta.Set(
		"object",
		fmt.Sprintf(
			"%d bytes per iteration, %d layers x %d payloads, CP rank 0 of %d",
			cfg.TotalBytes,
			cfg.Layers,
			cfg.Payloads,
			cfg.CPSize,
		),
	)
	meta.Set("workers", cfg.Workers)
	meta.Set(
		"iterations",
		fmt.Sprintf("%d per side and round, %d rounds, 1 untimed first", cfg.Iters, cfg.Rounds),
	)
	meta.SingleRank()
	rows, err := bench.RunCopy(cfg)
	if err != nil {
		return err
	}
	return out.write(
		meta,
		rows,
		bench.CopyWrong(rows),
		func(w io.Writer) { bench.WriteCopyTable(w, rows) },
		func(path string) error {
			return bench.PlotCopy(
				rows,
				path,
				fmt.Sprintf(
					"page copies, %d MiB per iteration, %d worker(s) (cphicache %s)",
					cfg.TotalBytes>>20,
					cfg.Workers,
					version,
				),
			)
		},
	)
}
