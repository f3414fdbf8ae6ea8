package runner

import (
	"sync"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/report"
)

// The runner's side of --metrics-file and --metrics-interval: when a periodic file is due, world
// rank 0's own counters for it, and the file's removal at a signal. What a file holds and how it is
// written are the report's (hicache/report, metrics.go).

// metricsTicker says when a periodic write is due: every interval of its clock, checked between
// steps.
type metricsTicker struct {
	every time.Duration
	next  time.Time
	now   func() time.Time
	// writing is held by a periodic write, and taken for good by abandon: a file removed at a
	// signal cannot be renamed back into place by a write that was under way.
	writing sync.Mutex
}

// abandon is the job's clean-up action for the periodic file (the watchdog's and a signal's exit
// run it): it removes the file, whose cphicache_metrics_final 0 would tell a collector that a dead
// job is still running, and stops any later write.
func (m *metricsTicker) abandon(path string) func() {
	return func() {
		m.writing.Lock()     // never released: the process is ending
		outfile.Remove(path) // a regular file only: never /dev/null
	}
}

func newMetricsTicker(every time.Duration, now func() time.Time) *metricsTicker {
	return &metricsTicker{every: every, next: now().Add(every), now: now}
}

// due is true once per interval passed; a step longer than the interval gives one write, not a
// backlog.
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

// groupView is world rank 0's view during the run: its counters now, labelled with its CP group. It
// reads only this rank's state, between steps, and enters no collective.
func (rs *runState) groupView() *report.Metrics {
	t := rs.job.Topo
	c := rs.counters()
	r := &report.Report{CP: t.CPSize, DP: t.DPSize, Steps: rs.core.Step(),
		Groups: []report.GroupReport{{Group: t.CPGroup, Latency: kindLatencies(&rs.cons.latency)}}}
	if rs.l3 != nil {
		r.L3 = report.NewL3(rs.l3Config(), &c)
	}
	r.Fill(&c)
	r.Provenance = rs.opts.Provenance
	own := []report.CounterView{{CPGroup: t.CPGroup, WorldRank: t.WorldRank, Report: r}}
	return &report.Metrics{
		Job:     rs.opts.JobID,
		Report:  r,
		Groups:  own,
		Ranks:   own,
		Written: time.Now(),
	}
}

// writeMetricsIfDue writes the periodic file when due. A failed write is this rank's failure: it
// travels in the next consensus, so the group ends together rather than leaving its peers in a
// collective.
func (rs *runState) writeMetricsIfDue() {
	if !rs.metrics.due() {
		return
	}
	rs.metrics.writing.Lock()
	defer rs.metrics.writing.Unlock()
	if err := rs.groupView().Write(rs.opts.MetricsPath); err != nil {
		rs.core.Fail(cache.FailureMetrics, err)
	}
}

// checkMetricsPath fails at start, before any shared memory exists, on a --metrics-file whose
// directory is missing, not a directory or not writable, or that names a directory itself.
func checkMetricsPath(path string) error {
	return outfile.Check("metrics-file", path)
}
