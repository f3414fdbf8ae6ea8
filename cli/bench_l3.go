package cli

// bench l3: the L3 store (hicache/l3) beside plain files on the same filesystem, in one process.

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/bench"
)

type l3BenchOptions struct {
	dir            string
	blockBytes     cli.Int64Slice
	blocks, rounds int
	roundBytes     int64
	fsync, cold    bool
	out            benchOutput

	cfg bench.L3Config
}

func (o *l3BenchOptions) flags() []cli.Flag {
	env := func(name string) []string { return []string{"CPHICACHE_BENCH_L3_" + name} }
	return append([]cli.Flag{
		&cli.StringFlag{
			Name:        "l3-dir",
			Value:       os.TempDir(),
			EnvVars:     env("DIR"),
			Destination: &o.dir,
			Usage:       "an existing directory on the filesystem to measure (the L3's); the benchmark works in a subdirectory it makes and removes",
		},
		&cli.Int64SliceFlag{
			Name:        "block-bytes",
			Value:       cli.NewInt64Slice(32<<10, 256<<10, 1<<20, 4<<20, 16<<20),
			EnvVars:     env("BLOCK_BYTES"),
			Destination: &o.blockBytes,
			Usage:       "block payload sizes in bytes, comma separated; whole pages of 4096 bytes (run's default geometry)",
		},
		&cli.IntFlag{
			Name:        "blocks",
			Value:       16,
			EnvVars:     env("BLOCKS"),
			Destination: &o.blocks,
			Usage:       "blocks (and reference files) each side writes and reads back per size and round, at least (see --round-bytes)",
		},
		&cli.Int64Flag{
			Name:        "round-bytes",
			Value:       16 << 20,
			EnvVars:     env("ROUND_BYTES"),
			Destination: &o.roundBytes,
			Usage:       "more blocks for a small size, until a round moves this many payload bytes per side and direction (a round of a few hundred microseconds is one scheduler tick of a neighbour); 0 = --blocks at every size",
		},
		&cli.IntFlag{
			Name:        "rounds",
			Value:       10,
			EnvVars:     env("ROUNDS"),
			Destination: &o.rounds,
			Usage:       "timed rounds per size, after one untimed that validates; each times ours and the reference, alternating which goes first; the median round is reported",
		},
		&cli.BoolFlag{
			Name:        "fsync",
			EnvVars:     env("FSYNC"),
			Destination: &o.fsync,
			Usage:       "fsync every block (ours: Store.Write's fsync of the file and its directory) and every reference file",
		},
		&cli.BoolFlag{
			Name:        "cold",
			EnvVars:     env("COLD"),
			Destination: &o.cold,
			Usage:       "drop every file from the page cache between writes and reads (fdatasync + posix_fadvise DONTNEED, untimed, both sides): reads from the device, as an L3 read of a block no longer in memory; default: reads from the page cache",
		},
	}, benchOutputFlags("l3", false, &o.out)...)
}

func (o *l3BenchOptions) before(*cli.Context) error {
	o.cfg = bench.L3Config{
		Dir:        o.dir,
		BlockBytes: o.blockBytes.Value(),
		Blocks:     o.blocks,
		RoundBytes: o.roundBytes,
		Rounds:     o.rounds,
		Fsync:      o.fsync,
		Cold:       o.cold,
	}
	return o.cfg.Validate()
}

func benchL3Command() *cli.Command {
	o := &l3BenchOptions{}
	return &cli.Command{
		Name:         "l3",
		Usage:        "the L3 store's Write and verified Read of blocks, beside plain file writes and reads of the same bytes in the same directory (one rank, no mpirun needed)",
		Flags:        o.flags(),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action:       func(*cli.Context) error { return benchL3(o.cfg, &o.out) },
	}
}

func benchL3(cfg bench.L3Config, out *benchOutput) error {
	meta := bench.NewMeta("l3", version)
	meta.Set(
		"ours",
		"hicache/l3 Store.Write of every block (temporary file, rename), then Store.Read of every block (header, length and checksum of every byte verified, mtime refreshed)",
	)
	meta.Set(
		"reference",
		"os.WriteFile's steps for each block (create, write, close) in one directory, then each file read whole into one buffer",
	)
	if cfg.Cold {
		meta.Set(
			"reads",
			"from the device on both sides: every file written back and dropped from the page cache (fdatasync, posix_fadvise DONTNEED) between the writes and the reads, untimed",
		)
	} else {
		meta.Set("reads", "from the page cache on both sides: each reads back what it just wrote")
	}
	meta.Set("directory", fmt.Sprintf("%s (%s)", cfg.Dir, bench.FilesystemType(cfg.Dir)))
	meta.Set("block sizes", fmt.Sprint(cfg.BlockBytes))
	meta.Set(
		"blocks",
		fmt.Sprintf(
			"%d per side, size and round, or more to move %d bytes (the blocks column)",
			cfg.Blocks,
			cfg.RoundBytes,
		),
	)
	meta.Set("fsync", cfg.Fsync)
	meta.Set("cold", cfg.Cold)
	meta.Set(
		"rounds",
		fmt.Sprintf(
			"%d timed, alternating which side goes first, after 1 untimed that validates every byte",
			cfg.Rounds,
		),
	)
	meta.SingleRank()
	// A signal cancels the run between two blocks, so that the benchmark removes its files before
	// exiting.
	var rows []bench.L3Row
	err := interruptible(
		"bench l3's files under "+cfg.Dir+" removed",
		func(ctx context.Context) (err error) {
			rows, err = bench.RunL3(ctx, cfg)
			return err
		},
	)
	if err != nil {
		return err
	}
	return out.write(
		meta,
		rows,
		bench.L3Wrong(rows),
		func(w io.Writer) { bench.WriteL3Table(w, rows) },
		nil,
	)
}
