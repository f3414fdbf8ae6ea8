package cli

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// series is one metric family's series by their labels, written as the text format writes them
// (sorted).
func seriesByLabels(mf *dto.MetricFamily) map[string]*dto.Metric {
	out := map[string]*dto.Metric{}
	for _, m := range mf.GetMetric() {
		var parts []string
		for _, l := range m.GetLabel() {
			if l.GetName() != "job_id" {
				parts = append(parts, l.GetName()+"="+l.GetValue())
			}
		}
		out[strings.Join(parts, ",")] = m
	}
	return out
}

// TestRunMetricsFileMatchesTheReport: the end-of-run metrics file, read with Prometheus's parser,
// holds the JSON report's values as the sums of its series by CP group (and by rank, for a rank's
// own counters: every rank's series there), and one latency histogram per CP group and consensus
// kind whose count is that group's calls in the report. Two CP groups, with periodic writes the
// final one must replace.
func TestRunMetricsFileMatchesTheReport(t *testing.T) {
	dir := t.TempDir()
	report, metrics := filepath.Join(dir, "report.json"), filepath.Join(dir, "cphicache.prom")
	res := runMPI(
		t,
		8,
		180*time.Second,
		"run",
		"--quiet",
		"--cp",
		"4",
		"--dp",
		"2",
		"--report",
		report,
		"--metrics-file",
		metrics,
		"--metrics-interval",
		"20ms",
	)
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	m := readReport(t, report)
	families := readMetrics(t, metrics)
	// counter sums the series of name whose labels, but cp_group and world_rank, are labels; a
	// per-rank counter must have a series for each of the 8 ranks, a group's for each of the 2
	// groups.
	counter := func(name, labels string) float64 {
		t.Helper()
		sum, matched := sumSeries(families, name, labels)
		if want := map[bool]string{true: "1", false: "2 (a group's) or 8 (a rank's)"}[name == "cphicache_metrics_final"]; !strings.Contains(
			want,
			strconv.Itoa(matched),
		) {
			t.Errorf("%s{%s}: %d series, want %s", name, labels, matched, want)
		}
		return sum
	}
	for _, c := range []struct{ name, labels, key string }{
		{"cphicache_prompt_tokens_total", "tier=l1", "hits.l1_tokens"},
		{"cphicache_prompt_tokens_total", "tier=l2", "hits.l2_tokens"},
		{"cphicache_prompt_tokens_total", "tier=computed", "hits.miss_tokens"},
		{"cphicache_backups_reserved_total", "", "backup.reserved"},
		{"cphicache_backups_committed_total", "", "backup.committed"},
		{"cphicache_backup_reserve_misses_total", "", "backup.reserve_misses"},
		{"cphicache_l1_evictions_total", "", "l1.evictions"},
		{"cphicache_l2_evictions_total", "", "backup.l2_evictions"},
		{"cphicache_load_backs_total", "", "l1.load_backs"},
		{"cphicache_copy_bytes_total", "direction=d2h", "bytes.d2h"},
		{"cphicache_copy_bytes_total", "direction=h2d", "bytes.h2d"},
		{"cphicache_placement_divergences_total", "", "placement.divergences"},
		{"cphicache_load_back_pages_total", "", "verify.pages_loaded_back"},
		{"cphicache_load_back_pages_verified_total", "", "verify.pages_checked"},
		{"cphicache_load_back_mismatches_total", "", "verify.mismatches"},
		{"cphicache_audit_mismatches_total", "", "verify.audit_mismatches"},
		{"cphicache_copy_errors_total", "", "verify.copy_errors"},
		{"cphicache_steps_total", "", "steps"},
	} {
		if got, want := counter(c.name, c.labels), reportNumber(t, m, c.key); got != want {
			t.Errorf("%s{%s} = %v, report %s = %v", c.name, c.labels, got, c.key, want)
		}
	}
	// A file of zeros would match a report of zeros: the busy counters must have counted.
	for _, key := range []string{"hits.l1_tokens", "hits.l2_tokens", "bytes.d2h", "bytes.h2d", "l1.load_backs"} {
		if reportNumber(t, m, key) <= 0 {
			t.Errorf("report %s is 0: the comparison above proves nothing", key)
		}
	}
	if final := counter("cphicache_metrics_final", ""); final != 1 {
		t.Errorf(
			"cphicache_metrics_final = %v: the end-of-run write did not replace the periodic one",
			final,
		)
	}
	checkLatencyHistograms(t, families["cphicache_consensus_latency_seconds"], m)
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf(
			"%d files in the metrics directory, want the report and the metrics file only: %v",
			len(entries),
			entries,
		)
	}
	checkNoSegments(t)
}

// sumSeries sums the series of name whose labels, but cp_group and world_rank, are labels (as the
// text format writes them, sorted: "tier=l2"), and counts them: the job's total of a counter is its
// groups' or ranks' sum.
func sumSeries(
	families map[string]*dto.MetricFamily,
	name, labels string,
) (sum float64, matched int) {
	for key, s := range seriesByLabels(families[name]) {
		var rest []string
		for _, kv := range strings.Split(key, ",") {
			if !strings.HasPrefix(kv, "cp_group=") && !strings.HasPrefix(kv, "world_rank=") &&
				kv != "" {
				rest = append(rest, kv)
			}
		}
		if strings.Join(rest, ",") == labels {
			sum += s.GetCounter().GetValue() + s.GetGauge().GetValue()
			matched++
		}
	}
	return sum, matched
}

// readMetrics parses a metrics file with Prometheus's own parser.
func readMetrics(t *testing.T, path string) map[string]*dto.MetricFamily {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return families
}

// checkLatencyHistograms: one histogram per CP group and kind, counting that group's calls of that
// kind.
func checkLatencyHistograms(t *testing.T, mf *dto.MetricFamily, m map[string]any) {
	t.Helper()
	series := seriesByLabels(mf)
	groups := m["groups"].([]any)
	kinds := len(groups[0].(map[string]any)["collectives"].(map[string]any))
	if want := len(groups) * kinds; kinds < 5 || len(series) != want {
		t.Errorf(
			"%d latency histograms, want %d (%d kinds per CP group, 5 or more)",
			len(series),
			want,
			kinds,
		)
	}
	for _, g := range groups {
		group := g.(map[string]any)
		id := strconv.Itoa(int(group["group"].(float64)))
		for kind, stats := range group["collectives"].(map[string]any) {
			calls := stats.(map[string]any)["count"].(float64)
			h, ok := series["cp_group="+id+",kind="+kind]
			if !ok {
				t.Errorf("no latency histogram for group %s, kind %s", id, kind)
				continue
			}
			if got := float64(h.GetHistogram().GetSampleCount()); got != calls {
				t.Errorf("group %s %s: histogram count %v, report %v calls", id, kind, got, calls)
			}
			if kind == "step" && (calls == 0 || h.GetHistogram().GetSampleSum() <= 0) {
				t.Errorf(
					"group %s: %v step calls, latency sum %v",
					id,
					calls,
					h.GetHistogram().GetSampleSum(),
				)
			}
		}
	}
}

// TestRunMetricsFileInAMissingDirectoryFailsAtStart: the flag is checked before MPI starts, so no
// rank makes a slab, and the message names the flag.
func TestRunMetricsFileInAMissingDirectoryFailsAtStart(t *testing.T) {
	besideOthers(t)
	missing := filepath.Join(t.TempDir(), "no-such-dir", "cphicache.prom")
	res := runMPI(t, 2, 60*time.Second, "run", "--quiet", "--metrics-file", missing)
	if res.exitCode == 0 {
		t.Fatalf("the job exited 0 with --metrics-file in a missing directory")
	}
	if !strings.Contains(res.stderr, "--metrics-file") ||
		!strings.Contains(res.stderr, "does not exist") {
		t.Errorf("the message does not name the flag and the missing directory:\n%s", res.stderr)
	}
	if strings.Contains(res.stdout, "result:") {
		t.Errorf("the job ran:\n%s", res.stdout)
	}
	checkNoSegments(t)
}

// TestTheMetricsFileHoldsTheJobsResult: the end-of-run file's cphicache_run_result is the status
// the job exits with, labelled by its result line, for an alert to fire on (cphicache_run_result !=
// 0): 0 and ok for a clean run, 5 and ok_but for --strict at cp 1 (placement not compared), 1 and
// failed for a divergence.
func TestTheMetricsFileHoldsTheJobsResult(t *testing.T) {
	besideOthers(t)
	for _, tc := range []struct {
		np     int
		args   []string
		result string
		status int
	}{
		{2, nil, "ok", 0},
		{1, []string{"--strict"}, "ok_but", 5},
		{2, []string{"--inject-divergence", "1@3"}, "failed", 1},
	} {
		metrics := filepath.Join(t.TempDir(), "cphicache.prom")
		args := append(
			[]string{"run", "--quiet", "--conversations", "8", "--metrics-file", metrics},
			tc.args...)
		res := runMPI(t, tc.np, 60*time.Second, args...)
		if res.exitCode != tc.status {
			t.Fatalf(
				"%v: exit %d, want %d\n%s%s",
				args,
				res.exitCode,
				tc.status,
				res.stdout,
				res.stderr,
			)
		}
		series := seriesByLabels(readMetrics(t, metrics)["cphicache_run_result"])
		if len(series) != 1 || series["result="+tc.result] == nil ||
			series["result="+tc.result].GetGauge().GetValue() != float64(tc.status) {
			t.Errorf(
				"%v: cphicache_run_result %v, want one series {result=%q} of value %d",
				args,
				series,
				tc.result,
				tc.status,
			)
		}
	}
}
