package prefill

import (
	_ "embed"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// The traces PUBLISHED.md's `cphicache run` commands replay to reproduce rows of its table with the
// product itself (Mooncake format, 512-token blocks).
var (
	//go:embed testdata/glm-5.2-one-64k.jsonl
	glmOne64K string
	//go:embed testdata/llama-100k-cpu-hits.jsonl
	llama100KHits string
)

type mooncakeLine struct {
	Timestamp   int64   `json:"timestamp"`
	InputLength int64   `json:"input_length"`
	HashIDs     []int64 `json:"hash_ids"`
}

func readTrace(t *testing.T, text string) []mooncakeLine {
	t.Helper()
	var lines []mooncakeLine
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var m mooncakeLine
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		if int64(len(m.HashIDs)) != (m.InputLength+511)/512 {
			t.Errorf("%d tokens with %d block ids", m.InputLength, len(m.HashIDs))
		}
		lines = append(lines, m)
	}
	return lines
}

// TestFigureTracesMatchTheRows: glm-5.2-one-64k.jsonl is row 9's one cold 65,536-token prompt;
// llama-100k-cpu-hits.jsonl is two 100,000-token prompts A and B, 30 s apart, A B A B A B, so that
// on one GPU whose L1 holds one of them (2,048 pages of 64 tokens) each repeat misses L1 and hits
// the L2 (the host) for its 1,562 whole pages, 99,968 tokens, and computes its last 32: the run's
// TTFT p50 is a hit, rows 15's, its p90 a cold prompt, row 14's. The page-aligned hit is row 15's
// modelled TTFT within 0.1%.
func TestFigureTracesMatchTheRows(t *testing.T) {
	glm := readTrace(t, glmOne64K)
	if len(glm) != 1 || glm[0].InputLength != 65536 {
		t.Errorf("glm-5.2-one-64k.jsonl: %+v, want one 65,536-token prompt", glm)
	}
	hits := readTrace(t, llama100KHits)
	if len(hits) != 6 {
		t.Fatalf("llama-100k-cpu-hits.jsonl: %d requests, want 6", len(hits))
	}
	for i, h := range hits {
		same := i >= 2 && h.HashIDs[0] == hits[i-2].HashIDs[0]
		if h.InputLength != 100_000 || h.Timestamp != int64(30000*i) || (i >= 2 && !same) ||
			(i >= 1 && h.HashIDs[0] == hits[i-1].HashIDs[0]) {
			t.Errorf("llama-100k-cpu-hits.jsonl line %d: %d tokens at %d ms, want A B A B A B",
				i+1, h.InputLength, h.Timestamp)
		}
	}
	r := roofline(t, "llama-3.1-8b", "h100", 1)
	const fromL2 = 1562 * 64
	aligned := LoadSeconds(fromL2*r.Model.TokenBytes(), r.GPU.HostBytesPerSecond) +
		r.BatchSeconds([]Request{{NewTokens: 100_000 - fromL2, CachedTokens: fromL2}})
	if _, hit := vLLMHit(t, 100_000); math.Abs(aligned/hit-1) > 0.001 {
		t.Errorf("the page-aligned hit %g s, row 15's %g s", aligned, hit)
	}
}
