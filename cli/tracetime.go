package cli

// What world rank 0 reads of a trace's timestamps before the replay (workload.ScanTimestampOrder):
// the lines that go back in time, for the report and the summary, and the last arrival, which a
// serving-clock replay cannot finish before (trace time / --time-scale): a job whose Slurm time
// limit ends sooner is warned at start-up, not cut off with a TIMEOUT and no report.

import (
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/workload"
)

// jobEndTimeVariable is Slurm's projected end of the job (Unix seconds), in a batch job's
// environment from Slurm 23.02 on; Slurm 22.05 has none, and the sbatch scripts set it from
// scontrol's EndTime.
const jobEndTimeVariable = "SLURM_JOB_END_TIME"

// startTrace is world rank 0's scan of the trace, with the warning of warnPastJobEnd; nil on the
// other ranks, without a trace, for the token format (no timestamps) or a trace it cannot read (the
// replay's read says why).
func startTrace(job *spmd.Job, opts *config.Options) *workload.TimestampOrder {
	if job.Topo.WorldRank != 0 || opts.TracePath == "" || opts.TraceFormat == workload.TraceTokens {
		return nil
	}
	f, err := os.Open(opts.TracePath)
	if err != nil {
		return nil
	}
	defer f.Close()
	order, err := workload.ScanTimestampOrder(f, opts.TraceLimit)
	if err != nil {
		return nil
	}
	if s := opts.Serving; s != nil && !s.Virtual && s.RequestRate == 0 && s.Clients == 0 {
		warnPastJobEnd(
			os.Stderr,
			order.LatestMs,
			s.TimeScale,
			os.Getenv(jobEndTimeVariable),
			time.Now(),
		)
	}
	return &order
}

// traceReport is the report's account of the trace's order (nil without a scan).
func traceReport(order *workload.TimestampOrder) *report.TraceReport {
	if order == nil {
		return nil
	}
	return &report.TraceReport{
		TimestampsBackwards: order.Backwards,
		FirstBackwardsLine:  order.FirstLine,
	}
}

// warnPastJobEnd says, once, that a replay whose last request arrives at latestMs of trace time
// cannot end before the job's end (endUnix, Unix seconds; "" when the job has none) at timeScale,
// and which scale would fit.
func warnPastJobEnd(
	w io.Writer,
	latestMs int64,
	timeScale float64,
	endUnix string,
	now time.Time,
) bool {
	end, err := strconv.ParseInt(strings.TrimSpace(endUnix), 10, 64)
	if err != nil || end <= 0 || latestMs <= 0 || timeScale <= 0 {
		return false
	}
	leftSeconds := float64(end) - float64(now.UnixNano())/1e9
	needSeconds := float64(latestMs) / 1e3 / timeScale
	if needSeconds <= leftSeconds {
		return false
	}
	fit := "no --time-scale can fit it: the job has already ended"
	if leftSeconds > 0 {
		fit = fmt.Sprintf(
			"give --time-scale %s or more (the sbatch scripts' CPHICACHE_SBATCH_TIME_SCALE)",
			sizing.Significant(roundUp(float64(latestMs)/1e3/leftSeconds), 3),
		)
	}
	fmt.Fprintf(
		w,
		"cphicache: warning: the trace's last request arrives at %.0f s of trace time, at least %.0f s of this "+
			"replay at --time-scale %g, but the job ends in %.0f s (%s): it would be cut off before its report; %s, "+
			"or a longer job (sbatch --time)\n",
		float64(latestMs)/1e3,
		needSeconds,
		timeScale,
		leftSeconds,
		jobEndTimeVariable,
		fit,
	)
	return true
}

// roundUp is v rounded up to 2 significant digits (1.17 to 1.2, 1234 to 1300), so that the scale a
// message suggests is never below the one needed.
func roundUp(v float64) float64 {
	unit := math.Pow(10, math.Floor(math.Log10(v))-1)
	return math.Ceil(v/unit) * unit
}
