package cli

// `cphicache validate`: the validation matrix in one job, as a table and a report. It takes run's
// flags (runflags.go) but the metrics'.

import (
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/validate"
)

func validateCommand() *cli.Command {
	return replayCommand(
		"validate",
		"run the validation matrix in one job and print a table (check, ranks, steps, result, #wrong); exit non-zero on any failure",
		"Replays the workload in five passes and prints seven checks. The passes: as configured; with an L2 far smaller "+
			"than the working set; with one perturbed rank per CP group; and two over an L3 of their own (under --l3-dir when "+
			"given, else the temporary directory), one storing blocks and one loading them back while the last CP rank of "+
			"each group fails its reads. The checks: placement_identical (objects compared one by one across each CP group), "+
			"divergence_detected (the perturbation caught at the next consensus, then a fresh start), flush_reset, cp_scoping, "+
			"capacity_miss_uniform (the miss path decides identically on every rank), data_integrity (every load-back byte "+
			"for byte) and l3_roundtrip (blocks come back verified, failed reads become agreed misses). At cp 1 "+
			"placement_identical, divergence_detected and l3_roundtrip are skipped (no read is made to fail: a "+
			"wrong byte back from the L3 still fails the row); a check whose path the workload never took (no L2 miss, "+
			"no load-back, no L3 hit, no perturbation in a workload of under five steps: a small workload, or one whose "+
			"copies landed late on a busy node) is skipped as not "+
			"exercised, and --strict makes any skip exit 5. Its L3 directory is removed at the end, or by the "+
			"clean-up of a signal; one that a killed validate left (mpirun's SIGKILL can cut that clean-up short) is removed "+
			"by the next validate over the same base on that node, once the process that made it is gone. A progress "+
			"line per pass goes to stderr unless --quiet. Takes every flag of run but the metrics'.",
		false,
		validateMain,
	)
}

func validateMain(job *spmd.Job, opts *config.Options) error {
	if job.Topo.WorldRank == 0 && opts.ReportPath != "" {
		outfile.Remove(
			opts.ReportPath,
		) // the last job's: a validate that ends without its table writes none
	}
	var progress validate.Progress
	if !opts.Quiet && job.Topo.WorldRank == 0 {
		start := time.Now()
		progress = func(pass, passes int, what string) {
			fmt.Fprintf(
				os.Stderr,
				"cphicache: validate pass %d of %d: %s (%.1f s)\n",
				pass,
				passes,
				what,
				time.Since(start).Seconds(),
			)
		}
	}
	opts.Quiet = true // the passes' own progress lines would repeat per pass
	v, err := validate.Run(job, opts, progress)
	if err != nil {
		return err
	}
	if job.Topo.WorldRank == 0 {
		opts.Provenance.WriteHeader(os.Stdout)
		v.WriteTable(os.Stdout)
		v.Provenance = opts.Provenance
		if opts.ReportPath != "" {
			if err := v.WriteJSON(opts.ReportPath); err != nil {
				return err
			}
		}
	}
	if n := v.Failed(); n != 0 {
		return &report.ValidationFailed{Failed: n}
	}
	if opts.Strict {
		return v.NotCovered()
	}
	return nil
}
