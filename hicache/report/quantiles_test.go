package report

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestHistogramAndSortedTimesReadOneQuantile: a quantile read from the histogram (the report's
// percentiles) is the one SortedSeconds reads from the times themselves, the upper bound of the
// nearest rank's bucket, at every count: a rank computed again from p and n in floating point was
// one too high for 7 of 25 (7/25*25 > 7).
func TestHistogramAndSortedTimesReadOneQuantile(t *testing.T) {
	r := rand.New(rand.NewPCG(46, 6))
	for n := 1; n <= 300; n++ {
		var m MsQuantiles
		times := make([]int64, n)
		for i := range times {
			if r.IntN(5) > 0 {
				times[i] = r.Int64N(10e9)
			}
			m.ObserveNs(times[i])
		}
		slices.Sort(times)
		for _, p := range []float64{0.01, 0.28, 0.5, 0.9, 0.99, 1} {
			if got, want := m.Seconds(p), SortedSeconds(times, p); got != want {
				t.Fatalf("%d times, p%g: the histogram reads %g s, the sorted times %g s", n, 100*p,
					got, want)
			}
		}
	}
}

// TestMeansAddUp: the mean of each part of a sum adds up to the sum's mean, where the percentiles
// of the parts do not (the queue p50 and compute p50 against a TTFT p50 of their sum).
func TestMeansAddUp(t *testing.T) {
	var queue, compute, ttft MsQuantiles
	for _, part := range [][2]int64{{0, 300e6}, {0, 300e6}, {0, 100e6}, {600e6, 100e6}, {700e6, 100e6}} {
		queue.ObserveNs(part[0])
		compute.ObserveNs(part[1])
		ttft.ObserveNs(part[0] + part[1])
	}
	sum, mean := queue.MeanSeconds()+compute.MeanSeconds(), ttft.MeanSeconds()
	if math.Abs(sum-mean) > 1e-12*mean || mean != 0.44 {
		t.Errorf("mean queue %g s + mean compute %g s = %g s, mean TTFT %g s (want 0.44 s)",
			queue.MeanSeconds(), compute.MeanSeconds(), sum, mean)
	}
	// p50s: queue 0, compute 100 ms, TTFT 300 ms
	if p50 := queue.Seconds(0.5) + compute.Seconds(0.5); p50 >= ttft.Seconds(0.5) {
		t.Errorf("the p50s add up to %g s, the TTFT p50 %g s: the example shows nothing", p50,
			ttft.Seconds(0.5))
	}
}
