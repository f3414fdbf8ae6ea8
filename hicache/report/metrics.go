package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/cphicache/cphicache/hicache/outfile"
)

// Prometheus metrics for node_exporter's textfile collector (--metrics-file). Two views, written by
// world rank 0 only, so that no periodic write adds a collective. Every series is labelled job_id
// (not job, which Prometheus gives the scrape target: a scraped job label becomes exported_job) and
// keeps its labels for the life of the job, so that a counter is one series from the first periodic
// file to the final one:
//
//   - a CP group's replicated counters (cache decisions, the same on every rank of the group) carry
//     cp_group="<its index>"; a rank's own counters (copy bytes, verification, its L3 I/O) carry
//     cp_group and world_rank. The job's totals, the JSON report's, are their sums.
//   - during the run (--metrics-interval), world rank 0's own view: its group's counters and its
//     own, and its own consensus latencies; cphicache_metrics_final is 0.
//   - at the end, every group's and every rank's counters (gathered once, by the runner) and the
//     consensus latency histograms one series per CP group, as its CP rank 0 timed them;
//     cphicache_metrics_final is 1.
//   - every file has cphicache_metrics_written_timestamp_seconds, when it was written: the final
//     file stays where it is (the collector exports it until it is removed or replaced), so a rule
//     can age out a finished job's series by it; and cphicache_run_info, value 1, whose labels say
//     what produced the numbers (Provenance).

// latencyBuckets is the number of finite histogram bounds: 10 us to 2.6 s, by factors of 4.
const latencyBuckets = 10

var latencyBoundsSeconds = prometheus.ExponentialBuckets(10e-6, 4, latencyBuckets)

// LatencyHist is one kind's consensus latencies on one rank: plain counters the report can gather
// as integers.
type LatencyHist struct {
	counts [latencyBuckets + 1]int64 // per bucket, not cumulative; the last is above the top bound
	sumNs  int64
}

// LatencyHistWords is the length of a LatencyHist as words: its counts and sumNs, as gathered.
const LatencyHistWords = latencyBuckets + 2

// Metrics is what one metrics file holds: each CP group's replicated counters, each rank's own,
// each listed group's latency histograms (Report.Groups) and, in the final file, the serving
// clock's.
type Metrics struct {
	Job    string
	Final  bool
	Report *Report
	Groups []CounterView // replicated counters, one a CP group
	Ranks  []CounterView // a rank's own counters, one a rank
	// Written is the file's time, for cphicache_metrics_written_timestamp_seconds.
	Written time.Time
	// ExitStatus is the status the job exits with, for cphicache_run_result: the end-of-run file's
	// (nil in a periodic one, which has no result yet).
	ExitStatus *int
}

// CounterView is one CP group's or one rank's counters, as a report's fields hold them.
type CounterView struct {
	CPGroup, WorldRank int
	Report             *Report
}

// Describe sends nothing: the view is an unchecked collector, whose series the registry still
// checks as it gathers.
func (v *Metrics) Describe(chan<- *prometheus.Desc) {}

// Collect sends the file's series, in the file's order: the counters by CP group, then by rank,
// the consensus latencies, the serving clock's TTFT (the end-of-run file's), and the gauges that
// say what the file is: final or periodic, when written, the run's result and what produced it.
func (v *Metrics) Collect(ch chan<- prometheus.Metric) {
	v.collectCounters(ch, v.Groups, false)
	v.collectCounters(ch, v.Ranks, true)
	v.collectConsensusLatencies(ch)
	if s := v.Report.Serving; s != nil && v.Final && !s.Virtual {
		v.collectTTFT(ch, s)
	}
	v.collectFileGauges(ch)
	if v.Final && v.ExitStatus != nil {
		v.collectRunResult(ch)
	}
	if p := v.Report.Provenance; p != nil {
		v.collectRunInfo(ch, p)
	}
}

// cpGroupLabels are the labels every series by CP group starts with, a fresh slice each call, so
// that a series' own labels appended to it never share an array with another's.
func cpGroupLabels() []string { return []string{"job_id", "cp_group"} }

// collectCounters sends the counter series of views that are a rank's own (perRank) or a group's
// (not perRank): a group's labelled cp_group, a rank's cp_group and world_rank, so that each view
// keeps one series of each counter for the life of the job.
func (v *Metrics) collectCounters(ch chan<- prometheus.Metric, views []CounterView, perRank bool) {
	base := cpGroupLabels()
	for _, cv := range views {
		for _, s := range counterSamples(cv.Report) {
			if s.perRank != perRank {
				continue
			}
			labels, values := base, []string{v.Job, strconv.Itoa(cv.CPGroup)}
			if perRank {
				labels = append(labels, "world_rank")
				values = append(values, strconv.Itoa(cv.WorldRank))
			}
			if s.label != "" {
				labels, values = append(labels, s.label), append(values, s.value)
			}
			desc := prometheus.NewDesc("cphicache_"+s.name, s.help, labels, nil)
			ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(s.count), values...)
		}
	}
}

// collectConsensusLatencies sends each listed CP group's consensus latency histograms, one series
// a group and kind, as the group's CP rank 0 timed them (Report.Groups).
func (v *Metrics) collectConsensusLatencies(ch chan<- prometheus.Metric) {
	latency := prometheus.NewDesc(
		"cphicache_consensus_latency_seconds",
		"time in each consensus call by kind, waiting for the slowest rank included, as CP rank 0 of the group timed it",
		append(cpGroupLabels(), "kind"),
		nil,
	)
	for _, g := range v.Report.Groups {
		for _, l := range g.Latency {
			ch <- l.Hist.constHistogram(latency, v.Job, strconv.Itoa(g.Group), l.Kind)
		}
	}
}

// collectTTFT sends the serving clock's time to first token of every request of the job and its
// ideal's, both modelled and labelled by the job alone: the end-of-run file of a clock that is not
// virtual is the only one that has them.
func (v *Metrics) collectTTFT(ch chan<- prometheus.Metric, s *ServingReport) {
	const modelled = " (MODELLED: the serving clock's prefill and link rates, in the trace's time; see the report's serving.model)"
	job := []string{"job_id"} // every request of the job: the end-of-run file's alone
	ttft := prometheus.NewDesc(
		"cphicache_ttft_seconds",
		"time to first token of every request"+modelled,
		job,
		nil,
	)
	ideal := prometheus.NewDesc(
		"cphicache_ideal_ttft_seconds",
		"the same requests' time to first token over the run's own steps (the same batches, hits and arrivals) with a cache machinery that costs nothing, a floor for every request"+modelled,
		job,
		nil,
	)
	ch <- s.TTFTHist.constHistogram(ttft, ttftBoundsSeconds, v.Job)
	ch <- s.IdealHist.constHistogram(ideal, ttftBoundsSeconds, v.Job)
}

// collectFileGauges sends the gauges every file has: whether it is the end-of-run file and when it
// was written, in Unix seconds, so that a rule can tell a finished job's file and age it out.
func (v *Metrics) collectFileGauges(ch chan<- prometheus.Metric) {
	final := prometheus.NewDesc(
		"cphicache_metrics_final",
		"1 in the end-of-run file (every CP group's and rank's counters); 0 in a periodic one (world rank 0's group and its own)",
		[]string{"job_id"},
		nil,
	)
	ch <- prometheus.MustNewConstMetric(final, prometheus.GaugeValue, boolFloat(v.Final), v.Job)
	written := prometheus.NewDesc(
		"cphicache_metrics_written_timestamp_seconds",
		"when this file was written (Unix time): the end-of-run file stays until removed, so a rule can age a finished job out by it",
		[]string{"job_id"},
		nil,
	)
	ch <- prometheus.MustNewConstMetric(written, prometheus.GaugeValue, float64(v.Written.UnixNano())/1e9, v.Job)
}

// collectRunResult sends the exit status the job ends with, labelled by its result line, for an
// alert to match: the end-of-run file's alone, since only it knows the status (v.ExitStatus).
func (v *Metrics) collectRunResult(ch chan<- prometheus.Metric) {
	result := prometheus.NewDesc(
		"cphicache_run_result",
		"the exit status the job ends with (0 OK; 1 a check failed; 5 --strict and not everything checked), labelled by the result line: ok, ok_but (OK, but ...) or failed; the end-of-run file's alone",
		[]string{"job_id", "result"},
		nil,
	)
	ch <- prometheus.MustNewConstMetric(
		result,
		prometheus.GaugeValue,
		float64(*v.ExitStatus),
		v.Job,
		resultLabel(v.Report.Verdict()),
	)
}

// collectRunInfo sends cphicache_run_info, value 1, whose labels are p's, so that the numbers can
// be traced to what produced them.
func (v *Metrics) collectRunInfo(ch chan<- prometheus.Metric, p *Provenance) {
	names, values := p.infoLabels()
	info := prometheus.NewDesc(
		"cphicache_run_info",
		"1; its labels say what produced these numbers (the report's provenance)",
		append([]string{"job_id"}, names...),
		nil,
	)
	ch <- prometheus.MustNewConstMetric(info, prometheus.GaugeValue, 1, append([]string{v.Job}, values...)...)
}

// resultLabel is a verdict as a label value an alert can match: ok, ok_but or failed.
func resultLabel(verdict string) string {
	switch {
	case verdict == "OK":
		return "ok"
	case strings.HasPrefix(verdict, "OK, but"):
		return "ok_but"
	}
	return "failed"
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Write writes the file to path through a temporary file in its directory, renamed over path
// (outfile): a reader (the textfile collector) sees the old file or the new one, whole; on an error
// the temporary file is removed. A path that is not a regular file (/dev/null) is written in place:
// client_golang's WriteToTextfile, used before, renamed its temporary file over /dev/null too, as
// root.
func (v *Metrics) Write(path string) error {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(v); err != nil {
		return err
	}
	families, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("--metrics-file %s: %w", path, err)
	}
	return outfile.WriteFrom("metrics-file", path, func(w io.Writer) error {
		for _, f := range families {
			if _, err := expfmt.MetricFamilyToText(w, f); err != nil {
				return err
			}
		}
		return nil
	})
}

// WriteMetrics writes the aggregated report as the end-of-run metrics file (world rank 0 calls it),
// with the counters by group and rank the runner gathered (GroupViews, RankViews), but no result
// (WriteMetricsWithResult).
func (r *Report) WriteMetrics(path, job string) error {
	return (&Metrics{
		Job:     job,
		Final:   true,
		Report:  r,
		Groups:  r.GroupViews,
		Ranks:   r.RankViews,
		Written: time.Now(),
	}).Write(
		path,
	)
}

// WriteMetricsWithResult is WriteMetrics with cphicache_run_result: the status the job exits with,
// which only the command that ends the job knows (cli's run).
func (r *Report) WriteMetricsWithResult(path, job string, exitStatus int) error {
	return (&Metrics{Job: job, Final: true, Report: r, Groups: r.GroupViews, Ranks: r.RankViews, Written: time.Now(),
		ExitStatus: &exitStatus}).Write(
		path,
	)
}
