package runner

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/internal/errscope"
)

// parseMetrics reads a metrics file with Prometheus's own text parser.
func parseMetrics(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return families
}

// metricValue is the value of the one series of name whose labels include want; it fails unless
// exactly one does.
func metricValue(
	t *testing.T,
	families map[string]*dto.MetricFamily,
	name string,
	want map[string]string,
) float64 {
	t.Helper()
	var found []*dto.Metric
	for _, m := range families[name].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if match {
			found = append(found, m)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, want, len(found))
	}
	if h := found[0].GetHistogram(); h != nil {
		return float64(h.GetSampleCount())
	}
	return found[0].GetCounter().GetValue() + found[0].GetGauge().GetValue()
}

func TestMetricsTickerIsDueOncePerInterval(t *testing.T) {
	clock := time.Unix(1000, 0)
	m := newMetricsTicker(10*time.Second, func() time.Time { return clock })
	var due []int
	for s := 0; s <= 45; s++ { // one check a second, as steps of one second would
		if m.due() {
			due = append(due, s)
		}
		clock = clock.Add(time.Second)
	}
	if want := []int{10, 20, 30, 40}; !slices.Equal(due, want) {
		t.Errorf("due at seconds %v, want %v", due, want)
	}
	// A step longer than several intervals gives one write, and the next comes an interval after
	// it.
	clock = clock.Add(time.Minute)
	if !m.due() || m.due() {
		t.Error("after a long step: want one write, then none until the next interval")
	}
	if (*metricsTicker)(nil).due() {
		t.Error("no ticker (no --metrics-interval) must never be due")
	}
}

// sampleView is a view with every counter set, and a latency histogram for one group.
func sampleView() *report.Metrics {
	r := &report.Report{}
	r.Hits.L1Tokens, r.Hits.L2Tokens, r.Hits.MissTokens = 100, 50, 25
	r.Bytes.D2H, r.Bytes.H2D = 1<<20, 1<<19
	var hists [consensusKinds]report.LatencyHist
	hists[cache.StepConsensus].Observe(30 * time.Microsecond)
	hists[cache.StepConsensus].Observe(time.Hour) // above the top bound: counted in +Inf only
	g := report.GroupReport{Latency: kindLatencies(&hists)}
	r.Groups = []report.GroupReport{g}
	own := []report.CounterView{{Report: r}}
	return &report.Metrics{
		Job:     "j",
		Final:   true,
		Report:  r,
		Groups:  own,
		Ranks:   own,
		Written: time.Unix(1700000000, 0),
	}
}

// TestMetricsFileIsAlwaysWhole: a reader racing the writer always parses a whole file, the old one
// or the new.
func TestMetricsFileIsAlwaysWhole(t *testing.T) {
	if testWorld.Rank() != 0 {
		// A file test with no collective (world rank 0 writes the metrics file of a run): 200
		// whole-file replacements on each of 16 ranks took 4 to 6 s of make test-mpi's np 16 pass
		// and proved nothing more.
		t.Skip("one rank checks the file; the others would only repeat it")
	}
	path := filepath.Join(t.TempDir(), "m.prom")
	v := sampleView()
	if err := v.Write(path); err != nil {
		t.Fatal(err)
	}
	want := len(parseMetrics(t, path))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 200; i++ {
			if err := v.Write(path); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := 0; i < 200; i++ {
		if got := len(parseMetrics(t, path)); got != want {
			t.Fatalf(
				"read %d: %d metric families, want %d: a reader saw a partial file",
				i,
				got,
				want,
			)
		}
	}
	wg.Wait()
	f := parseMetrics(t, path)
	if got := metricValue(t, f, "cphicache_consensus_latency_seconds", map[string]string{"kind": "step", "cp_group": "0"}); got != 2 {
		t.Errorf("step latency count %v, want 2", got)
	}
	if got := metricValue(t, f, "cphicache_prompt_tokens_total", map[string]string{"tier": "l2", "cp_group": "0"}); got != 50 {
		t.Errorf("l2 tokens %v, want 50", got)
	}
}

// TestMetricsFileThatIsAStreamIsWrittenInPlace: --metrics-file /dev/null (a FIFO here) is written
// through the path and stays what it was; client_golang's WriteToTextfile renamed its temporary
// file over it, which as root replaced /dev/null with a regular file for every later job on the
// node.
func TestMetricsFileThatIsAStreamIsWrittenInPlace(t *testing.T) {
	if testWorld.Rank() != 0 {
		t.Skip("a file test with no collective: one rank checks it")
	}
	fifo := filepath.Join(t.TempDir(), "m.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(fifo)
		got <- b
	}()
	if err := sampleView().Write(fifo); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("%s is no longer a FIFO: %v", fifo, err) // and the reader waits for good
	}
	if b := <-got; !strings.Contains(string(b), "cphicache_prompt_tokens_total") {
		t.Errorf("the reader got no metrics: %q", b[:min(len(b), 200)])
	}
}

// TestMetricsWriteErrorLeavesNoTempFile: a write that cannot replace its path (here a directory)
// fails, naming the flag, and leaves nothing behind.
func TestMetricsWriteErrorLeavesNoTempFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.prom")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	err := sampleView().Write(path)
	if err == nil || !strings.Contains(err.Error(), "--metrics-file") {
		t.Fatalf("write over a directory: %v, want an error naming --metrics-file", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf(
			"the directory holds %d entries after a failed write, want only the one it had: %v",
			len(entries),
			entries,
		)
	}
}

func TestMetricsOptionsAreCheckedAtStart(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		path     string
		interval time.Duration
		flag     string // "" = valid
	}{
		{filepath.Join(dir, "m.prom"), time.Second, ""},
		{filepath.Join(dir, "missing", "m.prom"), 0, "metrics-file"},
		{dir, 0, "metrics-file"},
		{filepath.Join(dir, "m.prom"), -time.Second, "metrics-interval"},
		{"", time.Second, "metrics-interval"},
	} {
		opts := smallOptions()
		opts.MetricsPath, opts.MetricsInterval = tc.path, tc.interval
		err := CheckOptions(opts)
		var ce *errscope.ConfigError
		if tc.flag == "" && err != nil ||
			tc.flag != "" && (!errors.As(err, &ce) || ce.Flag != tc.flag) {
			t.Errorf(
				"%q every %v: %v, want an error naming --%s",
				tc.path,
				tc.interval,
				err,
				tc.flag,
			)
		}
	}
}

// TestPeriodicMetricsHoldRankZerosGroup: with an interval shorter than any step, world rank 0
// writes after every step; the last periodic file is its group's view after the last step.
func TestPeriodicMetricsHoldRankZerosGroup(t *testing.T) {
	opts := smallOptions()
	opts.MetricsPath, opts.MetricsInterval = filepath.Join(t.TempDir(), "m.prom"), time.Nanosecond
	r, err := runTesting(testJob(t), opts, checked())
	if err != nil {
		t.Fatal(err)
	}
	if testWorld.Rank() != 0 {
		return
	}
	f := parseMetrics(t, opts.MetricsPath)
	group := map[string]string{"cp_group": "0", "job_id": testJobID}
	if final := metricValue(t, f, "cphicache_metrics_final", nil); final != 0 {
		t.Errorf("cphicache_metrics_final %v in a periodic file", final)
	}
	// CP rank 0 of group 0 (world rank 0): one per step, 0 at cp 1
	stepCalls := r.Groups[0].Collectives["step"].Count
	if got := metricValue(t, f, "cphicache_consensus_latency_seconds", map[string]string{"cp_group": "0", "kind": "step"}); got != float64(
		stepCalls,
	) {
		t.Errorf("step latency count %v, want %d", got, stepCalls)
	}
	if _, dp := testLayout(); dp == 1 { // the report is group 0's alone
		if got := metricValue(t, f, "cphicache_steps_total", group); got != float64(r.Steps) {
			t.Errorf("steps_total %v, want %d", got, r.Steps)
		}
		for tier, want := range map[string]int64{"l1": r.Hits.L1Tokens, "l2": r.Hits.L2Tokens, "computed": r.Hits.MissTokens} {
			if got := metricValue(t, f, "cphicache_prompt_tokens_total", map[string]string{"cp_group": "0", "tier": tier}); got != float64(
				want,
			) {
				t.Errorf("prompt tokens %s: %v, want %d", tier, got, want)
			}
		}
	}
}

// TestFailedPeriodicMetricsWriteEndsTheGroup: world rank 0's failed write travels in the next
// consensus, so every rank ends with an error instead of waiting for rank 0 in a collective.
func TestFailedPeriodicMetricsWriteEndsTheGroup(t *testing.T) {
	opts := smallOptions()
	// a directory: the rename fails
	opts.MetricsPath, opts.MetricsInterval = t.TempDir(), time.Nanosecond
	_, err := runTesting(testJob(t), opts, checked())
	if err == nil {
		t.Fatal("the run succeeded although world rank 0 could not write its metrics")
	}
	if testWorld.Rank() == 0 && !strings.Contains(err.Error(), "--metrics-file") {
		t.Errorf("world rank 0's error does not name the flag: %v", err)
	}
	checkNoLeakedSegments(t)
}

// TestMetricSeriesKeepTheirLabels: every series of a periodic file is in the final file with the
// same labels, so that a counter stays one series for the whole job; no label is one Prometheus
// gives the scrape target (job, instance) or reserves (__*); every file says when it was written
// and carries the run's provenance as cphicache_run_info's labels.
func TestMetricSeriesKeepTheirLabels(t *testing.T) {
	opts := smallOptions()
	opts.MetricsPath, opts.MetricsInterval = filepath.Join(t.TempDir(), "m.prom"), time.Nanosecond
	opts.Provenance = &report.Provenance{
		Command:     "run",
		Version:     "test",
		CommandLine: []string{"cphicache", "run"},
		Config:      map[string]string{"seed": "7"},
	}
	r, err := runTesting(testJob(t), opts, checked())
	if err != nil {
		t.Fatal(err)
	}
	if testWorld.Rank() != 0 {
		return
	}
	periodic := parseMetrics(t, opts.MetricsPath)
	finalPath := filepath.Join(t.TempDir(), "final.prom")
	if err := r.WriteMetrics(finalPath, opts.JobID); err != nil {
		t.Fatal(err)
	}
	final := parseMetrics(t, finalPath)
	finalSeries := seriesKeys(t, final)
	for key := range seriesKeys(t, periodic) {
		if !finalSeries[key] &&
			!strings.HasPrefix(key, "cphicache_metrics_written_timestamp_seconds") {
			t.Errorf("%s is in the periodic file, not in the final one", key)
		}
	}
	if got := metricValue(t, final, "cphicache_run_info", map[string]string{"version": "test", "configuration": "--seed=7"}); got != 1 {
		t.Errorf("cphicache_run_info %v, want 1", got)
	}
	if got := metricValue(t, final, "cphicache_metrics_written_timestamp_seconds", nil); got < 1.7e9 {
		t.Errorf("cphicache_metrics_written_timestamp_seconds %v", got)
	}
	// The job's totals, the report's, are the sums of the groups' and ranks' series.
	var l2, d2h float64
	for _, m := range final["cphicache_prompt_tokens_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "tier" && l.GetValue() == "l2" {
				l2 += m.GetCounter().GetValue()
			}
		}
	}
	for _, m := range final["cphicache_copy_bytes_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "direction" && l.GetValue() == "d2h" {
				d2h += m.GetCounter().GetValue()
			}
		}
	}
	if l2 != float64(r.Hits.L2Tokens) || d2h != float64(r.Bytes.D2H) || d2h == 0 {
		t.Errorf(
			"sums: l2 tokens %v (report %d), d2h bytes %v (report %d)",
			l2,
			r.Hits.L2Tokens,
			d2h,
			r.Bytes.D2H,
		)
	}
}

// seriesKeys names every series as name{label="value",...}, and fails on a label Prometheus
// reserves.
func seriesKeys(t *testing.T, families map[string]*dto.MetricFamily) map[string]bool {
	t.Helper()
	keys := map[string]bool{}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				if n := l.GetName(); n == "job" || n == "instance" || strings.HasPrefix(n, "__") {
					t.Errorf("%s has the label %q, which Prometheus reserves", name, n)
				}
				labels = append(labels, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			keys[name+"{"+strings.Join(labels, ",")+"}"] = true
		}
	}
	return keys
}
