package cli

// The `bench` command: the CLI of package bench (flags, their validation, one call per subcommand),
// each subcommand in bench_<name>.go, and what they share: --json and --plot, and the header, table
// and exit they write. How each number is derived is in bench/PERFORMANCE.md; `make bench` runs the
// full set.

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/bench"
	"github.com/cphicache/cphicache/internal/errscope"
)

func benchCommand() *cli.Command {
	return &cli.Command{
		Name:  "bench",
		Usage: "benchmarks, each beside a reference measured in the same run: allreduce and step (under mpirun), copy, reserve, l3, e2e, replay",
		Description: "Output in the style of nccl-tests: a '#' header with the version, configuration and rank -> host map, " +
			"fixed-width columns with a units line, a #wrong column from validation outside the timed loops, and a non-zero " +
			"exit on any wrong result. --json FILE writes the rows for machines, --plot FILE.png draws them. " +
			"See bench/PERFORMANCE.md.",
		OnUsageError: onUsageError,
		Subcommands: []*cli.Command{
			benchAllreduceCommand(),
			benchStepCommand(),
			benchCopyCommand(),
			benchReserveCommand(),
			benchL3Command(),
			benchE2ECommand(),
			benchReplayCommand(),
		},
	}
}

// benchOutput is where a benchmark writes besides standard output.
type benchOutput struct{ json, plot string }

// benchOutputFlags are --json and, where the benchmark has a plot, --plot; env vars are per
// subcommand so that one exported variable cannot make two benchmarks write the same file.
func benchOutputFlags(sub string, plot bool, o *benchOutput) []cli.Flag {
	env := "CPHICACHE_BENCH_" + strings.ToUpper(strings.ReplaceAll(sub, "-", "_")) + "_"
	flags := []cli.Flag{
		&cli.StringFlag{
			Name:        "json",
			EnvVars:     []string{env + "JSON"},
			Category:    "output",
			Destination: &o.json,
			Usage:       "also write the header and rows as JSON to this file",
		},
	}
	if plot {
		flags = append(
			flags,
			&cli.StringFlag{
				Name:        "plot",
				EnvVars:     []string{env + "PLOT"},
				Category:    "output",
				Destination: &o.plot,
				Usage:       "also draw the rows beside the reference into this PNG file",
			},
		)
	}
	return flags
}

// write prints the header and table, then writes the JSON and the plot when asked, and turns wrong
// results into the command's error.
func (o *benchOutput) write(
	meta *bench.Meta,
	rows any,
	wrong int64,
	table func(io.Writer),
	plot func(string) error,
) error {
	meta.Set("command line", strings.Join(os.Args, " "))
	meta.WriteHeader(os.Stdout)
	table(os.Stdout)
	fmt.Printf("# wrong results: %d\n", wrong)
	if o.json != "" {
		if err := bench.WriteJSON(o.json, meta, rows, wrong); err != nil {
			return err
		}
	}
	if o.plot != "" && plot != nil {
		if err := plot(o.plot); err != nil {
			return err
		}
	}
	return bench.CheckWrong(meta.Benchmark, wrong)
}

func powerOfTwo(flag string, v int64, minimum int64) error {
	if v < minimum || v&(v-1) != 0 {
		return &errscope.ConfigError{
			Flag:   flag,
			Reason: fmt.Sprintf("%d is not a power of two of at least %d", v, minimum),
		}
	}
	return nil
}
