package hicache

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/outfile"
)

// Prometheus metrics for node_exporter's textfile collector (--metrics-file). Two views, written by world rank 0
// only, so that no metrics write adds a collective:
//
//   - during the run (--metrics-interval), world rank 0's own view: its CP group's replicated counters (the same on
//     every rank of the group), its own copy bytes and checks, and its own consensus latencies, all labelled with
//     its cp_group; cphicache_metrics_final is 0.
//   - at the end, the aggregated report: counters job-wide as the JSON report has them, cp_group="all"; consensus
//     latency histograms one series per CP group, as its CP rank 0 timed them (they travel with the report's
//     per-group collective counts); cphicache_metrics_final is 1.

// latencyBuckets is the number of finite histogram bounds: 10 us to 2.6 s, by factors of 4.
const latencyBuckets = 10

var latencyBoundsSeconds = prometheus.ExponentialBuckets(10e-6, 4, latencyBuckets)

// latencyHist is one kind's consensus latencies on one rank: plain counters the report can gather as integers.
type latencyHist struct {
	counts [latencyBuckets + 1]int64 // per bucket, not cumulative; the last is above the top bound
	sumNs  int64
}

const latencyHistWords = latencyBuckets + 2 // counts and sumNs, as gathered

func (h *latencyHist) observe(d time.Duration) {
	h.counts[sort.SearchFloat64s(latencyBoundsSeconds, d.Seconds())]++
	h.sumNs += d.Nanoseconds()
}

func (h *latencyHist) words() []int64 { return append(h.counts[:], h.sumNs) }

func latencyFromWords(w []int64) (h latencyHist) {
	copy(h.counts[:], w)
	h.sumNs = w[latencyBuckets+1]
	return h
}

// constHistogram is h as Prometheus wants it: a count, a sum in seconds and cumulative buckets.
func (h *latencyHist) constHistogram(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, latencyBuckets)
	var cumulative uint64
	for i, bound := range latencyBoundsSeconds {
		cumulative += uint64(h.counts[i])
		buckets[bound] = cumulative
	}
	count := cumulative + uint64(h.counts[latencyBuckets])
	return prometheus.MustNewConstHistogram(desc, count, float64(h.sumNs)/1e9, buckets, labels...)
}

// metricsView is what one metrics file holds: counters from a report under one cp_group label, and each listed
// group's latency histograms.
type metricsView struct {
	job, counterGroup string
	final             bool
	report            *Report
}

// counterSample is one counter series: a name, its help, and at most one label of its own.
type counterSample struct {
	name, help, label, value string
	count                    int64
}

func counterSamples(r *Report) []counterSample {
	const tiers = "prompt tokens by the tier that served them: l1 (device hit), l2 (shared-slab hit), l3 (prefetched from storage, with --l3-dir), computed (miss)"
	const bytes = "bytes copied between device and the shared slab: d2h (backups), h2d (load-backs)"
	samples := []counterSample{
		{"prompt_tokens_total", tiers, "tier", "l1", r.Hits.L1Tokens},
		{"prompt_tokens_total", tiers, "tier", "l2", r.Hits.L2Tokens},
		{"prompt_tokens_total", tiers, "tier", "computed", r.Hits.MissTokens},
		{"backups_reserved_total", "L2 backups whose slots were reserved", "", "", r.Backup.Reserved},
		{"backups_committed_total", "L2 backups committed (every CP rank finished its parts)", "", "", r.Backup.Committed},
		{"backup_reserve_misses_total", "L2 backups skipped on a full pool", "", "", r.Backup.ReserveMisses},
		{"l1_evictions_total", "device (L1) node evictions", "", "", r.L1.Evictions},
		{"l2_evictions_total", "shared-slab (L2) object evictions", "", "", r.Backup.L2Evictions},
		{"load_backs_total", "nodes loaded back from L2 into L1", "", "", r.L1.LoadBacks},
		{"copy_bytes_total", bytes, "direction", "d2h", r.Bytes.D2H},
		{"copy_bytes_total", bytes, "direction", "h2d", r.Bytes.H2D},
		{"placement_divergences_total", "placement divergences caught by the assert", "", "", r.Placement.Divergences},
		{"load_back_mismatches_total", "load-back pages with a wrong byte", "", "", r.Verify.Mismatches},
		{"audit_mismatches_total", "audited committed objects with a wrong byte", "", "", r.Verify.AuditMismatches},
		{"copy_errors_total", "page copies that failed", "", "", r.Verify.CopyErrors},
		{"steps_total", "steps replayed", "", "", r.Steps},
	}
	if l3 := r.L3; l3 != nil {
		const io = "L3 block files by direction: write (published), read (read and verified into the L2)"
		const ioBytes = "payload bytes of those block files by direction"
		samples = append(samples, []counterSample{
			{"prompt_tokens_total", tiers, "tier", "l3", r.Hits.L3Tokens},
			{"l3_blocks_total", io, "direction", "write", l3.Writes},
			{"l3_blocks_total", io, "direction", "read", l3.Reads},
			{"l3_bytes_total", ioBytes, "direction", "write", l3.WriteBytes},
			{"l3_bytes_total", ioBytes, "direction", "read", l3.ReadBytes},
			{"l3_write_errors_total", "L3 blocks dropped on a failed write (ENOSPC, EIO)", "", "", l3.WriteErrors},
			{"l3_writes_skipped_total", "L3 blocks not written: the directory is read-only", "", "", l3.WritesSkipped},
			{"l3_read_failures_total", "L3 reads that failed and were served as misses", "", "", l3.ReadFailures},
			{"l3_corrupt_total", "L3 block files that failed their checks (removed, never served)", "", "", l3.Corrupt},
			{"l3_evictions_total", "L3 block files removed to keep --l3-bytes", "", "", l3.Evictions},
			{"l3_prefetch_timeouts_total", "L3 prefetches not agreed done when their request was served", "", "", l3.PrefetchTimeouts},
		}...)
	}
	return samples
}

// Describe sends nothing: the view is an unchecked collector, whose series the registry still checks as it gathers.
func (v *metricsView) Describe(chan<- *prometheus.Desc) {}

func (v *metricsView) Collect(ch chan<- prometheus.Metric) {
	base := []string{"job", "cp_group"}
	for _, s := range counterSamples(v.report) {
		labels, values := base, []string{v.job, v.counterGroup}
		if s.label != "" {
			labels, values = append(labels, s.label), append(values, s.value)
		}
		desc := prometheus.NewDesc("cphicache_"+s.name, s.help, labels, nil)
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(s.count), values...)
	}
	latency := prometheus.NewDesc("cphicache_consensus_latency_seconds",
		"time in each consensus call by kind, waiting for the slowest rank included, as CP rank 0 of the group timed it",
		append(base, "kind"), nil)
	for _, g := range v.report.Groups {
		for k := range consensusKinds {
			ch <- g.latency[k].constHistogram(latency, v.job, strconv.Itoa(g.Group), k.String())
		}
	}
	if s := v.report.Serving; s != nil && v.final && !s.Virtual {
		const modelled = " (MODELLED: the serving clock's prefill and link rates, in the trace's time; see the report's serving.model)"
		ttft := prometheus.NewDesc("cphicache_ttft_seconds", "time to first token of every request"+modelled, base, nil)
		ideal := prometheus.NewDesc("cphicache_ideal_ttft_seconds", "the same requests' time to first token with the same hits and a cache machinery that costs nothing"+modelled, base, nil)
		ch <- s.ttft.constHistogram(ttft, ttftBoundsSeconds, v.job, v.counterGroup)
		ch <- s.ideal.constHistogram(ideal, ttftBoundsSeconds, v.job, v.counterGroup)
	}
	final := prometheus.NewDesc("cphicache_metrics_final",
		"1 in the end-of-run file (job-wide counters, cp_group=\"all\"); 0 in a periodic one (world rank 0's CP group)", []string{"job"}, nil)
	ch <- prometheus.MustNewConstMetric(final, prometheus.GaugeValue, boolFloat(v.final), v.job)
}

func boolFloat(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// write writes the view to path through a temporary file in its directory, renamed over path: a reader (the
// textfile collector) sees the old file or the new one, whole; on an error the temporary file is removed.
func (v *metricsView) write(path string) error {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(v); err != nil {
		return err
	}
	if err := prometheus.WriteToTextfile(path, reg); err != nil {
		return fmt.Errorf("--metrics-file %s: %w", path, err)
	}
	return nil
}

// WriteMetrics writes the aggregated report as the end-of-run metrics file (world rank 0 calls it).
func (r *Report) WriteMetrics(path, job string) error {
	return (&metricsView{job: job, counterGroup: "all", final: true, report: r}).write(path)
}

// metricsTicker says when a periodic write is due: every interval of its clock, checked between steps.
type metricsTicker struct {
	every time.Duration
	next  time.Time
	now   func() time.Time
	// writing is held by a periodic write, and taken for good by abandon: a file removed at a signal cannot be
	// renamed back into place by a write that was under way.
	writing sync.Mutex
}

// abandon is the job's clean-up action for the periodic file (the watchdog's and a signal's exit run it): it
// removes the file, whose cphicache_metrics_final 0 would tell a collector that a dead job is still running,
// and stops any later write.
func (m *metricsTicker) abandon(path string) func() {
	return func() {
		m.writing.Lock() // never released: the process is ending
		os.Remove(path)
	}
}

func newMetricsTicker(every time.Duration, now func() time.Time) *metricsTicker {
	return &metricsTicker{every: every, next: now().Add(every), now: now}
}

// due is true once per interval passed; a step longer than the interval gives one write, not a backlog.
func (m *metricsTicker) due() bool {
	if m == nil {
		return false
	}
	now := m.now()
	if now.Before(m.next) {
		return false
	}
	m.next = now.Add(m.every)
	return true
}

// groupView is world rank 0's view during the run: its counters now, labelled with its CP group. It reads only
// this rank's state, between steps, and enters no collective.
func (rs *runState) groupView() *metricsView {
	t := rs.job.Topo
	c := rs.counters()
	r := &Report{CP: t.CPSize, DP: t.DPSize, Steps: rs.core.Step(),
		Groups: []GroupReport{{Group: t.CPGroup, latency: rs.cons.latency}}}
	if rs.l3 != nil {
		r.L3 = newL3Report(&c, rs.opts.L3, rs.l3.store.Namespace())
	}
	r.fill(&c)
	return &metricsView{job: rs.opts.JobID, counterGroup: strconv.Itoa(t.CPGroup), report: r}
}

// writeMetricsIfDue writes the periodic file when due. A failed write is this rank's failure: it travels in the
// next consensus, so the group ends together rather than leaving its peers in a collective.
func (rs *runState) writeMetricsIfDue() {
	if !rs.metrics.due() {
		return
	}
	rs.metrics.writing.Lock()
	defer rs.metrics.writing.Unlock()
	if err := rs.groupView().write(rs.opts.MetricsPath); err != nil {
		rs.core.Fail(cache.FailureMetrics, err)
	}
}

// checkMetricsPath fails at start, before any shared memory exists, on a --metrics-file whose directory is
// missing, not a directory or not writable, or that names a directory itself.
func checkMetricsPath(path string) error {
	return outfile.Check("metrics-file", path)
}
