package runner

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/prefill"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// perTokenPrefill is a prefill model for tests: a fixed time per computed token.
type perTokenPrefill struct{ secondsPerToken float64 }

func (m perTokenPrefill) BatchSeconds(batch []serving.Tokens) float64 {
	var s float64
	for _, t := range batch {
		s += float64(t.New) * m.secondsPerToken
	}
	return s
}

func servingOptions() *config.Options {
	opts := smallOptions()
	opts.Serving = &config.ServingOptions{Prefill: prefill.Options{GPU: "h100"},
		L3ReadBytesPerSecond: 5e9, Batching: serving.Batching{StepTokens: 1024, MaxRequests: 16},
		TimeScale: 1, RequestRate: 400}
	return opts
}

// servingTesting is the levers of a run of servingOptions: every test's checks, and a prefill of 20
// us a token.
func servingTesting() *Testing {
	tst := checked()
	tst.Prefill = perTokenPrefill{20e-6}
	return tst
}

// TestServingClockTimesEveryRequest: under the serving clock every request gets a time to first
// token, the steps take at least their modelled time (the ranks wait for it), the ideal is no
// slower than the run, and the cache still checks everything it checks without the clock.
func TestServingClockTimesEveryRequest(t *testing.T) {
	opts := servingOptions()
	opts.TimelinePath = filepath.Join(t.TempDir(), "timeline.json")
	r, err := runTesting(testJob(t), opts, servingTesting())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Serving
	if s == nil {
		t.Fatal("no serving report with the serving clock on")
	}
	if s.Requests != r.Requests || r.Requests == 0 {
		t.Fatalf("%d requests timed of %d served", s.Requests, r.Requests)
	}
	// Every computed token costs 20 us of trace time: the replay cannot end before all of a group's
	// have run.
	computed := float64(r.Hits.MissTokens) / float64(r.DP)
	if minimum := computed * 20e-6; r.WallSeconds < minimum {
		t.Errorf(
			"the replay took %.3f s, less than its modelled compute, %.3f s: the clock did not pace the steps",
			r.WallSeconds,
			minimum,
		)
	}
	// The ideal is a floor for every request, so at every percentile: the machinery only adds time.
	checkPartsAddUp(t, s)
	if s.TTFT.P50 <= 0 || s.IdealTTFT.P50 <= 0 || s.TTFT.P50 < s.IdealTTFT.P50 ||
		s.Compute.P50 <= 0 {
		t.Errorf(
			"TTFT p50 %g s, ideal %g s, compute %g s: want both above 0 and the ideal no slower",
			s.TTFT.P50,
			s.IdealTTFT.P50,
			s.Compute.P50,
		)
	}
	if r.Verify.PagesChecked == 0 || r.Verify.Mismatches != 0 || r.Placement.Divergences != 0 {
		t.Errorf(
			"pages checked %d, mismatches %d, divergences %d",
			r.Verify.PagesChecked,
			r.Verify.Mismatches,
			r.Placement.Divergences,
		)
	}
	var summary strings.Builder
	r.WriteSummary(&summary)
	if !strings.Contains(summary.String(), "serving clock, MODELLED") ||
		!strings.Contains(summary.String(), "TTFT p50") {
		t.Errorf("the summary does not give the modelled TTFT:\n%s", summary.String())
	}
	if testWorld.Rank() == 0 {
		checkServingMetrics(t, r)
		if tl, err := os.ReadFile(opts.TimelinePath); err != nil ||
			!strings.Contains(string(tl), "serving clock: modelled prefill") {
			t.Errorf("the timeline shows no modelled prefill (%v)", err)
		}
	}
	checkNoLeakedSegments(t)
}

// checkServingMetrics: the end-of-run metrics file holds a TTFT histogram, and its ideal, of every
// request.
func checkServingMetrics(t *testing.T, r *report.Report) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.prom")
	if err := r.WriteMetrics(path, testJobID); err != nil {
		t.Fatal(err)
	}
	f := parseMetrics(t, path)
	for _, name := range []string{"cphicache_ttft_seconds", "cphicache_ideal_ttft_seconds"} {
		h := f[name].GetMetric()
		if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != uint64(r.Requests) ||
			h[0].GetHistogram().GetSampleSum() <= 0 {
			t.Errorf("%s: %v, want one histogram of %d requests", name, h, r.Requests)
		}
	}
}

func TestMsQuantilesReadZeroAsZero(t *testing.T) {
	var q report.MsQuantiles
	for range 6 {
		q.ObserveNs(0)
	}
	for _, ms := range []int64{10, 20, 30, 40} {
		q.ObserveNs(ms * 1e6)
	}
	if got := q.Seconds(0.5); got != 0 {
		t.Errorf("p50 of six zeros and four times: %g s, want 0", got)
	}
	if got := q.Seconds(0.7); got < 0.010 || got > 0.0102 {
		t.Errorf("p70: %g s, want 10 ms (within its bucket's 2%%)", got)
	}
	if got := q.Seconds(1); got < 0.040 || got > 0.0408 {
		t.Errorf("p100: %g s, want 40 ms (within its bucket's 2%%)", got)
	}
}

// TestVirtualServingIsTheSameFromRunToRun: the sweep's serving figures come from a virtual replay
// of the run's own hits, which --sync-copies makes a function of the configuration: two runs give
// the same TTFT, and no measured figure.
func TestVirtualServingIsTheSameFromRunToRun(t *testing.T) {
	var first *report.ServingReport
	for range 2 {
		opts := servingOptions()
		opts.SyncCopies, opts.Serving.Virtual = true, true
		r, err := runTesting(testJob(t), opts, servingTesting())
		if err != nil {
			t.Fatal(err)
		}
		s := r.Serving
		if s == nil || !s.Virtual || s.Requests != r.Requests || s.IdealTTFT.P50 <= 0 ||
			s.TTFT.P50 != 0 {
			t.Fatalf(
				"virtual serving report %+v for %d requests: want the ideal only",
				s,
				r.Requests,
			)
		}
		if first == nil {
			first = s
		} else if !reflect.DeepEqual(first, s) {
			t.Fatalf("two runs of one configuration: %+v, then %+v", *first, *s)
		}
	}
}

// TestServingClockWithTheRoofline: a model from the table on a GPU from the table, built for the CP
// size: the summary names the roofline and says where each tier pays, and a computed token costs
// the model's time.
func TestServingClockWithTheRoofline(t *testing.T) {
	opts := servingOptions()
	opts.Model, opts.CopyTokenBytes = "deepseek-v3", 8
	opts.Serving.Prefill = prefill.Options{
		Model:      "deepseek-v3",
		GPU:        "h200",
		Efficiency: prefill.DefaultEfficiency,
	}
	opts.Serving.TimeScale, opts.Serving.RequestRate = 20, 40
	if err := opts.Serving.Check(); err != nil {
		t.Fatal(err)
	}
	r, err := runTesting(testJob(t), opts, checked())
	if err != nil {
		t.Fatal(err)
	}
	s := r.Serving
	if s == nil || !strings.Contains(s.Model, "roofline") || len(s.BreakEven) == 0 ||
		s.Compute.P50 <= 0 {
		t.Fatalf(
			"serving report %+v: want the roofline named, its break-even lines and a compute time",
			s,
		)
	}
}

// TestScaledWaitsStayWaits: a trace time over a tiny --time-scale is the longest wait a Duration
// holds, not one that overflows into a negative wait (none at all); an ordinary scale divides.
func TestScaledWaitsStayWaits(t *testing.T) {
	if got := newServingClock(
		&config.ServingOptions{TimeScale: 10}, true, nil,
	).scaled(int64(time.Second)); got != 100*time.Millisecond {
		t.Errorf("1 s at --time-scale 10: %v, want 100ms", got)
	}
	tiny := newServingClock(&config.ServingOptions{TimeScale: 1e-300}, true, nil)
	if got := tiny.scaled(int64(time.Millisecond)); got != math.MaxInt64 {
		t.Errorf("1 ms at --time-scale 1e-300: %v, want the longest Duration", got)
	}
	if got := tiny.scaled(-int64(time.Millisecond)); got > 0 {
		t.Errorf("-1 ms at --time-scale 1e-300: %v, want no wait", got)
	}
}

// TestServingOptionsNameTheirFlag: every bad serving flag fails before MPI, naming the flag.
func TestServingOptionsNameTheirFlag(t *testing.T) {
	good := func() *config.ServingOptions {
		return &config.ServingOptions{
			Prefill: prefill.Options{
				Model:      "deepseek-v3",
				GPU:        "h200",
				Efficiency: 0.5,
			},
			L3ReadBytesPerSecond: 1e9,
			Batching:             serving.Batching{StepTokens: 8192, MaxRequests: 64},
			TimeScale:            1,
		}
	}
	if err := good().Check(); err != nil {
		t.Fatalf("good options: %v", err)
	}
	for flag, spoil := range map[string]func(o *config.ServingOptions){
		"gpu":                func(o *config.ServingOptions) { o.Prefill.GPU = "a100x" },
		"model":              func(o *config.ServingOptions) { o.Prefill.Model = "gpt-9" },
		"prefill-efficiency": func(o *config.ServingOptions) { o.Prefill.Efficiency = 150 },
		"l3-read-rate":       func(o *config.ServingOptions) { o.L3ReadBytesPerSecond = 0 },
		"time-scale":         func(o *config.ServingOptions) { o.TimeScale = 0 },
		"request-rate":       func(o *config.ServingOptions) { o.RequestRate = -1 },
		"step-tokens":        func(o *config.ServingOptions) { o.Batching.StepTokens = 0 },
		"step-requests":      func(o *config.ServingOptions) { o.Batching.MaxRequests = 0 },
		// both sources of arrivals
		"clients":    func(o *config.ServingOptions) { o.Clients, o.RequestRate = 4, 10 },
		"think-time": func(o *config.ServingOptions) { o.Clients, o.ThinkSeconds = 4, -1 },
	} {
		o := good()
		spoil(o)
		var ce *errscope.ConfigError
		if err := o.Check(); !errors.As(err, &ce) || ce.Flag != flag {
			t.Errorf("spoiled --%s: %v, want a ConfigError naming it", flag, err)
		}
	}
}

// TestServingClockNeedsArrivalTimes: a workload without arrival times (the synthetic one) and no
// --request-rate is refused on every rank before the replay: CP rank 0, which reads the workload,
// names the flag, and its peers learn that it failed.
func TestServingClockNeedsArrivalTimes(t *testing.T) {
	opts := servingOptions()
	opts.Serving.RequestRate = 0
	job := testJob(t)
	_, err := runTesting(job, opts, servingTesting())
	var ce *errscope.ConfigError
	if job.Topo.CPRank == 0 && (!errors.As(err, &ce) || ce.Flag != "request-rate") || err == nil {
		t.Fatalf(
			"CP rank %d: %v, want an error (a ConfigError naming --request-rate on CP rank 0)",
			job.Topo.CPRank,
			err,
		)
	}
	checkNoLeakedSegments(t)
}

// TestServingClockWithAnL3: steps the clock forms hold more requests than --batch-requests, and the
// L3's prefetch counts (a word of the step's vector each) must take them all: a run over an L3,
// twice over one directory, with steps of up to 16 requests, prefetches and serves L3 hits.
func TestServingClockWithAnL3(t *testing.T) {
	dir := sharedTempDir(t)
	for pass := range 2 {
		opts := servingOptions()
		opts.BatchRequests = 2
		opts.Serving.RequestRate = 4000 // every step full
		opts.L3 = l3Options(dir).L3
		r, err := runTesting(testJob(t), opts, servingTesting())
		checkL3Run(t, "serving clock", r, err)
		if pass == 1 && (r.Hits.L3Tokens == 0 || r.Serving == nil) {
			t.Fatalf(
				"the second pass over the directory served no L3 hit under the clock: %+v",
				r.Hits,
			)
		}
	}
	checkNoLeakedSegments(t)
}

// TestIdealHitsCountTheClocksSteps: --flush-every counts the steps the serving clock forms (by
// arrivals and the token budget), not --batch-requests at a time, and so does the report's ideal
// hit count. Every request of the trace arrives at 0, so the clock's steps are the budget's alone,
// known in advance.
func TestIdealHitsCountTheClocksSteps(t *testing.T) {
	opts := servingOptions()
	opts.Serving.RequestRate, opts.FlushEvery = 0, 2
	events, err := workload.GenerateSynthetic(opts.Synthetic)
	if err != nil {
		t.Fatal(err)
	}
	var trace bytes.Buffer
	if err := workload.WriteMooncakeTrace(&trace, events, 32); err != nil {
		t.Fatal(err)
	}
	atZero := regexp.MustCompile(`"timestamp":[0-9]+`).
		ReplaceAll(trace.Bytes(), []byte(`"timestamp":0`))
	opts.TracePath, opts.TraceBlockTokens = filepath.Join(t.TempDir(), "at-zero.jsonl"), 32
	if err := os.WriteFile(opts.TracePath, atZero, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := runTesting(testJob(t), opts, servingTesting())
	if err != nil {
		t.Fatal(err)
	}
	compact, err := readTraceFileAs(
		opts.TracePath,
		workload.TraceOptions{VocabSize: opts.VocabSize, BlockTokens: 32},
	)
	if err != nil {
		t.Fatal(err)
	}
	var want, byBatch int64
	for g := range r.DP {
		replica := workload.ShardForReplica(compact, r.DP, g)
		cfg := workload.IdealConfig{
			PageTokens:      opts.PageTokens,
			VocabSize:       opts.VocabSize,
			BatchRequests:   opts.BatchRequests,
			FlushEverySteps: 2,
		}
		byBatch += workload.IdealHitTokens(replica, cfg)
		queue := make([]serving.Queued, len(replica))
		for i, e := range replica {
			queue[i] = serving.Queued{PromptTokens: e.Request.PromptTokens(), Flush: e.Flush}
		}
		for len(queue) > 0 {
			n, _ := opts.Serving.Batching.Take(queue, 0)
			cfg.StepEvents, queue = append(cfg.StepEvents, n), queue[n:]
		}
		want += workload.IdealHitTokens(replica, cfg)
	}
	if r.Hits.IdealTokens != want || want == byBatch || r.Hits.L1Tokens+r.Hits.L2Tokens > want {
		t.Fatalf(
			"ideal hit tokens %d, want %d by the clock's steps (%d by --batch-requests'), at least the %d achieved",
			r.Hits.IdealTokens,
			want,
			byBatch,
			r.Hits.L1Tokens+r.Hits.L2Tokens,
		)
	}
}

// TestALateWakeUpIsNotTheStepsWork: a step's real work is its wall time less how late its paced
// waits woke (a loaded node's scheduler, which a GPU's compute does not wait for), so a step whose
// work fit under its model ends at the model's end however late the pace woke; real work past the
// model still lengthens it.
func TestALateWakeUpIsNotTheStepsWork(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, tc := range []struct{ wall, late, end, overrun int64 }{
		// 9 ms of work under a 10 ms model, the pace woke 3 ms late
		{12 * ms, 3 * ms, 110 * ms, 0},
		{15 * ms, 3 * ms, 112 * ms, 2 * ms}, // 12 ms of work: 2 ms past the model
		{8 * ms, 0, 110 * ms, 0},
	} {
		if end, overrun := stepEndNs(100*ms, 10*ms, tc.wall, tc.late); end != tc.end ||
			overrun != tc.overrun {
			t.Errorf(
				"a 10 ms model, %d ms wall, woke %d ms late: end %d ms, overrun %d ms; want %d, %d",
				tc.wall/ms,
				tc.late/ms,
				end/ms,
				overrun/ms,
				tc.end/ms,
				tc.overrun/ms,
			)
		}
	}
}
