package cli

// `cphicache bench reserve` (one rank): the allocator's operations per second against pool and
// object size.

import (
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/bench"
)

type reserveOptions struct {
	slotsLog2, pages cli.IntSlice
	minSeconds       float64
	out              benchOutput

	cfg bench.ReserveConfig
}

func (o *reserveOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_RESERVE_" + name} }
	return append([]cli.Flag{
		&cli.IntSliceFlag{
			Name:        "slots-log2",
			Value:       cli.NewIntSlice(10, 12, 14, 16, 18, 20, 22, 24),
			EnvVars:     env("SLOTS_LOG2"),
			Destination: &o.slotsLog2,
			Usage:       "pool sizes as log2 of the slots, comma separated; each pool starts half full",
		},
		&cli.IntSliceFlag{
			Name:        "pages",
			Value:       cli.NewIntSlice(1, 16, 256),
			EnvVars:     env("PAGES"),
			Destination: &o.pages,
			Usage:       "object sizes in pages, comma separated",
		},
		&cli.Float64Flag{
			Name:        "min-seconds",
			Value:       0.2,
			EnvVars:     env("MIN_SECONDS"),
			Destination: &o.minSeconds,
			Usage:       "seconds: each cell runs batches of 1024 ops until this much time has passed, over 5 rounds that visit every cell",
		},
	}, benchOutputFlags("reserve", false, &o.out)...)
}

func (o *reserveOptions) before(*cli.Context) error {
	o.cfg = bench.ReserveConfig{
		SlotsLog2:  o.slotsLog2.Value(),
		Pages:      o.pages.Value(),
		MinSeconds: o.minSeconds,
	}
	return o.cfg.Validate()
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
	meta.Set(
		"time per cell",
		fmt.Sprintf(
			"at least %g s, in 5 rounds; every round visits every cell in rotating order, median round reported",
			cfg.MinSeconds,
		),
	)
	meta.SingleRank()
	rows, err := bench.RunReserve(cfg)
	if err != nil {
		return err
	}
	return out.write(
		meta,
		rows,
		bench.ReserveWrong(rows),
		func(w io.Writer) { bench.WriteReserveTable(w, rows) },
		nil,
	)
}
