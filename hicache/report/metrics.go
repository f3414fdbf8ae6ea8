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

// counterSample is one counter series: a name, its help, at most one label of its own, and whether
// the counter is a rank's own (agg:"rank" in Tallies) rather than its group's.
type counterSample struct {
	name, help, label, value string
	count                    int64
	perRank                  bool
}

func counterSamples(r *Report) []counterSample {
	const tiers = "prompt tokens by the tier that served them: l1 (device hit), l2 (shared-slab hit), l3 (prefetched from storage, with --l3-dir), computed (miss)"
	const bytes = "bytes copied between device and the shared slab: d2h (backups), h2d (load-backs)"
	samples := []counterSample{
		{"prompt_tokens_total", tiers, "tier", "l1", r.Hits.L1Tokens, false},
		{"prompt_tokens_total", tiers, "tier", "l2", r.Hits.L2Tokens, false},
		{"prompt_tokens_total", tiers, "tier", "computed", r.Hits.MissTokens, false},
		{
			"backups_reserved_total",
			"L2 backups whose slots were reserved",
			"",
			"",
			r.Backup.Reserved,
			false,
		},
		{
			"backups_committed_total",
			"L2 backups committed (every CP rank finished its parts)",
			"",
			"",
			r.Backup.Committed,
			false,
		},
		{
			"backup_reserve_misses_total",
			"L2 backups skipped on a full pool",
			"",
			"",
			r.Backup.ReserveMisses,
			false,
		},
		{"l1_evictions_total", "device (L1) node evictions", "", "", r.L1.Evictions, false},
		{
			"l2_evictions_total",
			"shared-slab (L2) object evictions",
			"",
			"",
			r.Backup.L2Evictions,
			false,
		},
		{"load_backs_total", "nodes loaded back from L2 into L1", "", "", r.L1.LoadBacks, false},
		{"copy_bytes_total", bytes, "direction", "d2h", r.Bytes.D2H, true},
		{"copy_bytes_total", bytes, "direction", "h2d", r.Bytes.H2D, true},
		{
			"placement_divergences_total",
			"placement divergences caught by the assert",
			"",
			"",
			r.Placement.Divergences,
			false,
		},
		{
			"load_back_mismatches_total",
			"load-back pages with a wrong byte",
			"",
			"",
			r.Verify.Mismatches,
			true,
		},
		{
			"audit_mismatches_total",
			"audited committed objects with a wrong byte",
			"",
			"",
			r.Verify.AuditMismatches,
			true,
		},
		{"copy_errors_total", "page copies that failed", "", "", r.Verify.CopyErrors, true},
		{"steps_total", "steps replayed", "", "", r.Steps, false},
	}
	if l3 := r.L3; l3 != nil {
		const io = "L3 block files by direction: write (published), read (read and verified into the L2)"
		const ioBytes = "payload bytes of those block files by direction"
		samples = append(samples, []counterSample{
			{"prompt_tokens_total", tiers, "tier", "l3", r.Hits.L3Tokens, false},
			{"l3_blocks_total", io, "direction", "write", l3.Writes, true},
			{"l3_blocks_total", io, "direction", "read", l3.Reads, true},
			{"l3_bytes_total", ioBytes, "direction", "write", l3.WriteBytes, true},
			{"l3_bytes_total", ioBytes, "direction", "read", l3.ReadBytes, true},
			{
				"l3_write_errors_total",
				"L3 blocks dropped on a failed write (ENOSPC, EIO)",
				"",
				"",
				l3.WriteErrors,
				true,
			},
			{
				"l3_writes_skipped_total",
				"L3 blocks not written: the directory is read-only",
				"",
				"",
				l3.WritesSkipped,
				true,
			},
			{
				"l3_read_failures_total",
				"L3 reads that failed and were served as misses",
				"",
				"",
				l3.ReadFailures,
				true,
			},
			{
				"l3_corrupt_total",
				"L3 block files that failed their checks (removed, never served)",
				"",
				"",
				l3.Corrupt,
				true,
			},
			{
				"l3_evictions_total",
				"L3 block files removed to keep --l3-bytes",
				"",
				"",
				l3.Evictions,
				true,
			},
			{
				"l3_prefetch_timeouts_total",
				"L3 prefetches not agreed done when their request was served",
				"",
				"",
				l3.PrefetchTimeouts,
				false,
			},
		}...)
	}
	return samples
}

// Describe sends nothing: the view is an unchecked collector, whose series the registry still
// checks as it gathers.
func (v *Metrics) Describe(chan<- *prometheus.Desc) {}

func (v *Metrics) Collect(ch chan<- prometheus.Metric) {
	base := []string{"job_id", "cp_group"}
	collect := func(views []CounterView, perRank bool) {
		for _, cv := range views {
			for _, s := range counterSamples(cv.Report) {
				if s.perRank != perRank {
					continue
				}
				labels, values := base, []string{v.Job, strconv.Itoa(cv.CPGroup)}
				if perRank {
					labels, values = append(
						labels,
						"world_rank",
					), append(
						values,
						strconv.Itoa(cv.WorldRank),
					)
				}
				if s.label != "" {
					labels, values = append(labels, s.label), append(values, s.value)
				}
				desc := prometheus.NewDesc("cphicache_"+s.name, s.help, labels, nil)
				ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(s.count), values...)
			}
		}
	}
	collect(v.Groups, false)
	collect(v.Ranks, true)
	latency := prometheus.NewDesc(
		"cphicache_consensus_latency_seconds",
		"time in each consensus call by kind, waiting for the slowest rank included, as CP rank 0 of the group timed it",
		append(base, "kind"),
		nil,
	)
	for _, g := range v.Report.Groups {
		for _, l := range g.Latency {
			ch <- l.Hist.constHistogram(latency, v.Job, strconv.Itoa(g.Group), l.Kind)
		}
	}
	if s := v.Report.Serving; s != nil && v.Final && !s.Virtual {
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
			"the same requests' time to first token with the same hits and a cache machinery that costs nothing"+modelled,
			job,
			nil,
		)
		ch <- s.TTFTHist.constHistogram(ttft, ttftBoundsSeconds, v.Job)
		ch <- s.IdealHist.constHistogram(ideal, ttftBoundsSeconds, v.Job)
	}
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
	if v.Final && v.ExitStatus != nil {
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
	if p := v.Report.Provenance; p != nil {
		names, values := p.infoLabels()
		info := prometheus.NewDesc(
			"cphicache_run_info",
			"1; its labels say what produced these numbers (the report's provenance)",
			append([]string{"job_id"}, names...),
			nil,
		)
		ch <- prometheus.MustNewConstMetric(info, prometheus.GaugeValue, 1, append([]string{v.Job}, values...)...)
	}
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
