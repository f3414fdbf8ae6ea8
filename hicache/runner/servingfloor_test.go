package runner

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
)

// TestASlowMachineryCostsMoreThanItsIdeal: a machinery whose every step takes 20 ms of real work,
// on steps modelled at 2 ms and a few more per 1,000 tokens, overruns every step: the run's TTFT
// p50 is well above its ideal's (the machinery's cost over 1), every request's first token comes
// no sooner than on the ideal's clock (its steps again at no cost), and the steps' time beyond the
// model is most of it.
func TestASlowMachineryCostsMoreThanItsIdeal(t *testing.T) {
	opts := servingOptions()
	opts.Synthetic.FlushEvery = 0
	opts.Serving.RequestRate = 200
	tst := checked()
	tst.Prefill = passPrefill{passSeconds: 0.002, secondsPerToken: 2e-6}
	tst.SlowStep = 20 * time.Millisecond
	var measured, ideal []serving.Timing
	tst.ServingTimings = func(m, i []serving.Timing) { measured, ideal = m, i }
	job := testJob(t)
	r, err := runTesting(job, opts, tst)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Serving
	if s == nil || s.Requests == 0 {
		t.Fatalf("no request timed: %+v", s)
	}
	if s.MeasuredOverIdealP50 <= 1.5 || s.MachinerySharePct < 50 {
		t.Fatalf(
			"a machinery 10 times slower than its steps' model: TTFT p50 %g s over ideal %g s = %.2f, %.1f%% of the steps' time beyond the model; want the cost above 1.5 and the share above 50%%",
			s.TTFT.P50, s.IdealTTFT.P50, s.MeasuredOverIdealP50, s.MachinerySharePct)
	}
	if job.Topo.CPRank == 0 {
		if len(measured) == 0 || len(measured) != len(ideal) {
			t.Fatalf("%d requests timed on the run's clock, %d on the ideal's", len(measured), len(ideal))
		}
		for i := range measured {
			if ideal[i].EndNs > measured[i].EndNs || ideal[i].ArrivalNs != measured[i].ArrivalNs {
				t.Fatalf("request %d: the run %+v, the ideal %+v: want the same arrival and the ideal no later",
					i, measured[i], ideal[i])
			}
		}
	}
	checkPartsAddUp(t, s)
	if s.Overrun.Mean <= 0 {
		t.Errorf("the steps overran their model, yet the mean overrun is %g s", s.Overrun.Mean)
	}
	t.Logf("TTFT p50 %g s, ideal %g s: %.2fx; %.1f%% of the steps' time beyond the model",
		s.TTFT.P50, s.IdealTTFT.P50, s.MeasuredOverIdealP50, s.MachinerySharePct)
	checkNoLeakedSegments(t)
}

// checkPartsAddUp: the means of a TTFT's parts add up to the mean TTFT, to within the rounding of
// dividing each part's sum by the count, and the overrun is a part of the compute; the ideal, a
// floor for every request, is no later at any percentile.
func checkPartsAddUp(t *testing.T, s *report.ServingReport) {
	t.Helper()
	sum := s.QueueWait.Mean + s.PrefetchWait.Mean + s.LoadWait.Mean + s.Compute.Mean
	if s.TTFT.Mean <= 0 || math.Abs(sum-s.TTFT.Mean) > 1e-9*s.TTFT.Mean ||
		s.Overrun.Mean > s.Compute.Mean {
		t.Errorf("mean TTFT %g s, its parts queue %g + L3 prefetch wait %g + load wait %g + compute %g = %g s (overrun %g s of the compute): want them to add up",
			s.TTFT.Mean, s.QueueWait.Mean, s.PrefetchWait.Mean, s.LoadWait.Mean, s.Compute.Mean,
			sum, s.Overrun.Mean)
	}
	if s.IdealTTFT.P50 > s.TTFT.P50 || s.IdealTTFT.P90 > s.TTFT.P90 ||
		s.IdealTTFT.P99 > s.TTFT.P99 || s.IdealTTFT.Mean > s.TTFT.Mean {
		t.Errorf("TTFT %+v, ideal %+v: want the ideal no later at every percentile and on average",
			s.TTFT, s.IdealTTFT)
	}
}

// TestAnIdealThatIsNoFloorFailsNamingTheRequest: a request whose first token came sooner on the
// run's clock than on its ideal's is an internal error that names it, not a ratio below 1.
func TestAnIdealThatIsNoFloorFailsNamingTheRequest(t *testing.T) {
	c := &servingClock{}
	rc := &requestClock{rid: "line-17", step: 3, arrivalNs: 100, firstTokenNs: 500, served: true}
	flush := &requestClock{flush: true}
	within := serving.Replay{Requests: []serving.Timing{{ArrivalNs: 100, EndNs: 500}, {EndNs: 900}}}
	if err := c.checkFloor([]*requestClock{rc, flush}, within); err != nil {
		t.Fatalf("an ideal equal to the run: %v", err)
	}
	later := serving.Replay{Requests: []serving.Timing{{ArrivalNs: 100, EndNs: 501}, {}}}
	err := c.checkFloor([]*requestClock{rc, flush}, later)
	if err == nil || !strings.Contains(err.Error(), "internal error") ||
		!strings.Contains(err.Error(), "request line-17") {
		t.Fatalf("an ideal 1 ns later than the run: %v, want an internal error naming request line-17", err)
	}
	unserved := &requestClock{rid: "line-18", arrivalNs: 100, firstTokenNs: 0}
	if err := c.checkFloor([]*requestClock{unserved}, later); err != nil {
		t.Fatalf("a request never served (a failed run) is not compared: %v", err)
	}
}
