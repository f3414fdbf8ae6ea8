package report

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestEverySeriesIsInMETRICSmd: every series the metrics file can hold (a run with an L3 and the
// serving clock) is named in METRICS.md, the page a Prometheus user reads to write a rule;
// cphicache_l3_writes_skipped_total was not.
func TestEverySeriesIsInMETRICSmd(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "METRICS.md"))
	if err != nil {
		t.Fatal(err)
	}
	r := &Report{Ranks: 2, CP: 2, DP: 1, L3: &L3Report{}, Serving: &ServingReport{}}
	path := filepath.Join(t.TempDir(), "m.prom")
	status := 0
	m := &Metrics{
		Job:        "j",
		Final:      true,
		Report:     r,
		Groups:     []CounterView{{0, 0, r}},
		Ranks:      []CounterView{{0, 0, r}},
		Written:    time.Now(),
		ExitStatus: &status,
	}
	if err := m.Write(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	names := regexp.MustCompile(`(?m)^# TYPE (\S+) `).FindAllStringSubmatch(string(b), -1)
	if len(names) < 20 {
		t.Fatalf("only %d series written:\n%s", len(names), b)
	}
	for _, n := range names {
		if !strings.Contains(string(doc), n[1]) {
			t.Errorf("METRICS.md does not name %s", n[1])
		}
	}
}
