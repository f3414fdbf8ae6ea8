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
	q.counts[bucketOfUs(us)]++
	q.n++
}

// QuantileUs is the p-quantile in microseconds (the upper bound of its bucket), 0 with no samples.
func (q *Quantiles) QuantileUs(p float64) float64 {
	if q.n == 0 {
		return 0
	}
	return q.rankUs(nearestRank(p, q.n))
}

// nearestRank is the p-quantile's rank among n samples, from 1: the smallest whose share of the
// samples is at least p (the nearest-rank method).
func nearestRank(p float64, n int64) int64 {
	return min(max(1, int64(math.Ceil(p*float64(n)))), n)
}

// rankUs is the upper bound of the bucket that holds the rank-th smallest sample (from 1), in
// microseconds.
func (q *Quantiles) rankUs(rank int64) float64 {
	var seen int64
	for i, c := range q.counts {
		if seen += c; seen >= rank {
			return bucketUpperUs(i)
		}
	}
	return bucketUpperUs(quantileBuckets - 1)
}

// bucketUpperUs is bucket i's upper bound in microseconds.
func bucketUpperUs(i int) float64 { return quantileFloorUs * math.Pow(quantileRatio, float64(i)) }

// bucketOfUs is the bucket that counts a latency of us microseconds.
func bucketOfUs(us float64) int {
	if us <= quantileFloorUs {
		return 0
	}
	return min(quantileBuckets-1, int(math.Ceil(math.Log(us/quantileFloorUs)/logQuantileRatio)))
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
// samples: the nearest rank's, as SortedSeconds reads it from the times themselves.
func (m *MsQuantiles) Seconds(p float64) float64 {
	if m.Count() == 0 {
		return 0
	}
	rank := nearestRank(p, m.Count())
	if rank <= m.zeros {
		return 0
	}
	return m.q.rankUs(rank-m.zeros) / 1e3
}

// MeanSeconds is the times' mean in seconds (their exact sum over their count), 0 with no
// samples. Unlike the quantiles, means add up: the mean of a sum of parts is the sum of their
// means.
func (m *MsQuantiles) MeanSeconds() float64 {
	if m.Count() == 0 {
		return 0
	}
	return float64(m.sumNs) / float64(m.Count()) / 1e9
}

// SortedSeconds is the p-quantile of sortedNs (ascending nanoseconds) read as MsQuantiles reads
// it: the upper bound of the bucket of the nearest rank's time, 0 for a time of 0 or less. A figure
// printed beside the report's percentiles is read so, never exactly beside a bucket's bound.
func SortedSeconds(sortedNs []int64, p float64) float64 {
	if len(sortedNs) == 0 {
		return 0
	}
	ns := sortedNs[nearestRank(p, int64(len(sortedNs)))-1]
	if ns <= 0 {
		return 0
	}
	return bucketUpperUs(bucketOfUs(float64(ns)/1e6)) / 1e3
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
