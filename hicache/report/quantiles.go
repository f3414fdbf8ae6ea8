package report

import (
	"math"
	"time"
)

// Quantiles keeps a latency distribution in bounded memory, for the report's p50 and p99: counts in
// buckets whose bounds grow by quantileRatio from quantileFloorUs, so that a quantile is known to
// within 2% however many calls a run makes (a list of samples either grows with the run or,
// bounded, drops the late ones unseen).
type Quantiles struct {
	counts [quantileBuckets]int64
	n      int64
}

// quantileRatio is the width of a bucket: its upper bound over its lower, so a quantile read from
// the bucket's upper bound is at most 2% high.
const quantileRatio = 1.02

// quantileFloorUs is the first bucket's upper bound; quantileBuckets then reach past 1,000 s
// (0.1 us x 1.02^1163 = 1e9 us), longer than any watchdog lets a call wait.
const (
	quantileFloorUs = 0.1
	quantileBuckets = 1164
)

var logQuantileRatio = math.Log(quantileRatio)

// Observe counts one latency.
func (q *Quantiles) Observe(d time.Duration) { q.observeUs(float64(d.Nanoseconds()) / 1e3) }

// observeUs counts one latency in microseconds.
func (q *Quantiles) observeUs(us float64) {
	i := 0
	if us > quantileFloorUs {
		i = min(quantileBuckets-1, int(math.Ceil(math.Log(us/quantileFloorUs)/logQuantileRatio)))
	}
	q.counts[i]++
	q.n++
}

// QuantileUs is the p-quantile in microseconds (the upper bound of its bucket), 0 with no samples.
func (q *Quantiles) QuantileUs(p float64) float64 {
	if q.n == 0 {
		return 0
	}
	rank := int64(math.Ceil(p * float64(q.n)))
	var seen int64
	for i, c := range q.counts {
		if seen += c; seen >= max(rank, 1) {
			return quantileFloorUs * math.Pow(quantileRatio, float64(i))
		}
	}
	return quantileFloorUs * math.Pow(quantileRatio, quantileBuckets-1)
}

// MsQuantiles is a distribution of times that reach far beyond a collective's, such as a request's
// time to first token: the same buckets, read in milliseconds (0.1 ms to 1e9 ms), and a count of
// times that were zero (a request that did not wait for a prefetch waited 0, not the first bucket's
// 0.1 ms).
type MsQuantiles struct {
	q     Quantiles
	zeros int64
	sumNs int64
}

// ObserveNs counts one time in nanoseconds; zero and below count as zero.
func (m *MsQuantiles) ObserveNs(ns int64) {
	m.sumNs += max(0, ns)
	if ns <= 0 {
		m.zeros++
		return
	}
	m.q.observeUs(float64(ns) / 1e6)
}

// Count is the number of times counted.
func (m *MsQuantiles) Count() int64 { return m.zeros + m.q.n }

// Seconds is the p-quantile in seconds (the upper bound of its bucket: at most 2% high), 0 with no
// samples.
func (m *MsQuantiles) Seconds(p float64) float64 {
	rank := max(1, int64(math.Ceil(p*float64(m.Count()))))
	if m.Count() == 0 || rank <= m.zeros {
		return 0
	}
	// The rank among the non-zero times, as a quantile of them.
	return m.q.QuantileUs(float64(rank-m.zeros)/float64(m.q.n)) / 1e3
}

// MsQuantilesWords is the length of an MsQuantiles as words: its buckets' counts, its zeros and its
// sum.
const MsQuantilesWords = quantileBuckets + 2

// Words are m as integers a sum over ranks merges (an all-reduce of them is the job's
// distribution).
func (m *MsQuantiles) Words() []int64 { return append(m.q.counts[:], m.zeros, m.sumNs) }

// SetWords sets m from w, as Words wrote it (or a sum of such).
func (m *MsQuantiles) SetWords(w []int64) {
	copy(m.q.counts[:], w)
	m.q.n, m.zeros, m.sumNs = 0, w[quantileBuckets], w[quantileBuckets+1]
	for _, n := range m.q.counts {
		m.q.n += n
	}
}
