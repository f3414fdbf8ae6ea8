package report

import (
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The consensus latency histogram: bounded buckets a rank observes into, carried as words through the runner's
// gather, and stated as a Prometheus histogram.

// Observe counts one latency.
func (h *LatencyHist) Observe(d time.Duration) {
	h.counts[sort.SearchFloat64s(latencyBoundsSeconds, d.Seconds())]++
	h.sumNs += d.Nanoseconds()
}

// Extend adds d to the time of the last latency counted, without counting another (a call in two
// parts).
func (h *LatencyHist) Extend(d time.Duration) { h.sumNs += d.Nanoseconds() }

// Words are h as integers, for a gather.
func (h *LatencyHist) Words() []int64 { return append(h.counts[:], h.sumNs) }

// LatencyFromWords is the LatencyHist that Words wrote as w.
func LatencyFromWords(w []int64) (h LatencyHist) {
	copy(h.counts[:], w)
	h.sumNs = w[latencyBuckets+1]
	return h
}

// constHistogram is h as Prometheus wants it: a count, a sum in seconds and cumulative buckets.
func (h *LatencyHist) constHistogram(desc *prometheus.Desc, labels ...string) prometheus.Metric {
	buckets := make(map[float64]uint64, latencyBuckets)
	var cumulative uint64
	for i, bound := range latencyBoundsSeconds {
		cumulative += uint64(h.counts[i])
		buckets[bound] = cumulative
	}
	count := cumulative + uint64(h.counts[latencyBuckets])
	return prometheus.MustNewConstHistogram(desc, count, float64(h.sumNs)/1e9, buckets, labels...)
}
