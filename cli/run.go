package cli

// `cphicache run`, the main job: one replay of the workload on every rank, then its summary, report
// and metrics file. Its flags are runOptions (runflags.go), which validate shares.

import (
	"errors"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/spmd"
)

func runCommand() *cli.Command {
	return replayCommand(
		"run",
		"the main job: replay a workload through the CP-shared L2 cache on every rank, verify every load-back, report",
		"Launch under mpirun, e.g. mpirun -np 8 cphicache run. CP-rank 0 of each CP group reads the workload and "+
			"broadcasts each step to its group; every rank runs the same cache logic; each step ends with one consensus, "+
			"a MIN all-reduce over the CP group that commits the backups every rank finished, agrees on load-backs, "+
			"compares the placement digest and carries any rank's failure; objects are compared one by one every "+
			"--placement-assert-every steps and at every flush. Exits non-zero on any divergence, a wrong byte in a "+
			"load-back or an audit, or a failed copy.",
		true,
		runMain,
	)
}

// runMain prints and writes the report, also that of a run that failed part-way (Run returns it
// beside the error), so that the failure is in the report a script reads; then it returns the
// failure.
//
// The provenance header comes first, as the run starts: a run that a signal or a failure ends still
// says what produced it, and a script or test that signals the run may do so once the header is
// out, since every rank's signal handling is in place before it (spmd.StartJob). Before it, the
// previous job's files at this run's output paths are removed: a run that a watchdog, a signal or a
// dead rank ends writes none of them, and a script must then find none, not the last job's "OK".
func runMain(job *spmd.Job, opts *config.Options) error {
	if job.Topo.WorldRank == 0 {
		for _, path := range []string{opts.ReportPath, opts.MetricsPath, opts.TimelinePath} {
			if path != "" {
				outfile.Remove(path) // a regular file only: never /dev/null
			}
		}
		opts.Provenance.WriteHeader(os.Stdout)
	}
	order := startTrace(job, opts)
	report, err := runner.Run(job, opts)
	if report == nil {
		// No final metrics file will replace a periodic one, which would say a dead job is still
		// running.
		if job.Topo.WorldRank == 0 && opts.MetricsPath != "" && opts.MetricsInterval > 0 {
			outfile.Remove(opts.MetricsPath) // a regular file only: never /dev/null
		}
		return err
	}
	if job.Topo.WorldRank == 0 {
		report.Trace = traceReport(order)
		if werr := writeOutputs(report, opts, err); werr != nil {
			err = errors.Join(err, werr)
		}
		report.WriteSummary(os.Stdout)
	}
	if err != nil {
		return err
	}
	if err := report.RunFailure(); err != nil || !opts.Strict {
		return err
	}
	return report.NotCovered()
}

// writeOutputs writes the metrics file, then the JSON report, recording a write that failed in the
// report as the run's failure before the next is written: the report, the metrics file's result and
// the summary printed after both never say OK of a job that exits 1 for a full disk. The metrics
// file is written again when the report then fails to write, so that its cphicache_run_result says
// failed too. runErr is Run's.
func writeOutputs(r *report.Report, opts *config.Options, runErr error) error {
	var errs error
	metricsWritten := false
	if opts.MetricsPath != "" {
		if err := r.WriteMetricsWithResult(
			opts.MetricsPath, opts.JobID, jobExitStatus(r, runErr, opts.Strict),
		); err != nil {
			r.FailOutput(err)
			errs = err
		}
		metricsWritten = errs == nil
	}
	if opts.ReportPath != "" {
		if err := r.WriteJSON(opts.ReportPath); err != nil {
			r.FailOutput(err)
			errs = errors.Join(errs, err)
			if metricsWritten {
				errs = errors.Join(
					errs,
					r.WriteMetricsWithResult(
						opts.MetricsPath,
						opts.JobID,
						jobExitStatus(r, runErr, opts.Strict),
					),
				)
			}
		}
	}
	return errs
}

// jobExitStatus is the status the job exits with (runMain's error, as withJob ends the process with
// it): Run's error's, else a failed check's (1), else --strict's for a run that did not check
// everything (5), else 0.
func jobExitStatus(r *report.Report, runErr error, strict bool) int {
	err := runErr
	if err == nil {
		err = r.RunFailure()
	}
	if err == nil && strict {
		err = r.NotCovered()
	}
	if err == nil {
		return 0
	}
	return spmd.ExitStatus(err)
}
