package cli

// `cphicache gen-trace`: the synthetic workload written as a trace, in either format run's --trace
// reads.

import (
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// genTraceOptions: the synthetic workload's flags, the same definitions as run's, and where to
// write.
type genTraceOptions struct {
	synthetic   syntheticOptions
	output      string
	format      string
	blockTokens int

	cfg         workload.SyntheticConfig                // checked, by Before
	writeEvents func(io.Writer, []workload.Event) error // the --format's writer, by Before
}

func genTraceCommand() *cli.Command {
	o := &genTraceOptions{}
	return &cli.Command{
		Name:  "gen-trace",
		Usage: "write the synthetic workload as a JSON Lines trace (either format --trace replays); needs no mpirun",
		Flags: append(
			append(syntheticFlags(&o.synthetic), seedFlags(&o.synthetic)...),
			&cli.StringFlag{
				Name:        "output",
				Aliases:     []string{"o"},
				Value:       "-",
				EnvVars:     []string{"CPHICACHE_GEN_TRACE_OUTPUT"},
				Destination: &o.output,
				Usage:       "file to write; - = standard output",
			},
			&cli.StringFlag{
				Name:        "format",
				Value:       "tokens",
				EnvVars:     []string{"CPHICACHE_GEN_TRACE_FORMAT"},
				Destination: &o.format,
				Usage:       "tokens (rid, input_ids, output_len) or mooncake (block ids: each block's tokens hashed with the previous block's id, numbered in order of first appearance)",
			},
			traceBlockTokensFlag(&o.blockTokens),
		),
		OnUsageError: onUsageError,
		Before:       o.before,
		Action: func(c *cli.Context) error {
			// standard output is free: say what produced the file (on it, the trace is the output)
			if o.output != "-" {
				newProvenance(c).WriteHeader(os.Stdout)
			}
			return o.write()
		},
	}
}

// before checks gen-trace's flags: the synthetic workload, the format and its block size.
func (o *genTraceOptions) before(*cli.Context) (err error) {
	if o.cfg, err = o.synthetic.config(); err != nil {
		return err
	}
	if o.output != "-" {
		if err := outfile.Check("output", o.output); err != nil {
			return err
		}
	}
	o.writeEvents, err = traceWriter(o.format, o.blockTokens)
	return err
}

func (o *genTraceOptions) write() error {
	events, err := workload.GenerateSynthetic(o.cfg)
	if err != nil {
		return err
	}
	if o.output == "-" {
		return o.writeEvents(os.Stdout, events)
	}
	// Whole or not at all (outfile): a full disk never leaves half a trace in place of the one
	// before it.
	return outfile.WriteFrom(
		"output",
		o.output,
		func(w io.Writer) error { return o.writeEvents(w, events) },
	)
}

// traceWriter is gen-trace's writer for --format.
func traceWriter(format string, blockTokens int) (func(io.Writer, []workload.Event) error, error) {
	switch format {
	case "tokens":
		return workload.WriteTrace, nil
	case "mooncake":
		if blockTokens < 1 || blockTokens > workload.BlockTokensMax {
			return nil, &errscope.ConfigError{
				Flag:   "trace-block-tokens",
				Reason: fmt.Sprintf("%d outside [1, %d]", blockTokens, workload.BlockTokensMax),
			}
		}
		return func(w io.Writer, events []workload.Event) error {
			return workload.WriteMooncakeTrace(w, events, blockTokens)
		}, nil
	}
	return nil, &errscope.ConfigError{
		Flag:   "format",
		Reason: fmt.Sprintf("%q is not one of tokens, mooncake", format),
	}
}
