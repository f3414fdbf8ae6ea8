package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/workload"
)

// TestRunReplaysAMooncakeTrace: a Mooncake trace replays clean from its compact form (every rank
// expands the same tokens, or the placement digests and load-back checks would disagree), and the
// report's ideal hit count is the workload's, summed over the replicas, and bounds what the cache
// achieved.
func TestRunReplaysAMooncakeTrace(t *testing.T) {
	opts := smallOptions()
	events, err := workload.GenerateSynthetic(opts.Synthetic)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "mooncake.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := workload.WriteMooncakeTrace(f, events, 32); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	opts.TracePath, opts.TraceBlockTokens = path, 32
	r, err := runTesting(testJob(t), opts, checked())
	if err != nil {
		t.Fatal(err)
	}
	if r.Placement.Divergences != 0 || r.Verify.Mismatches != 0 || r.Verify.AuditMismatches != 0 {
		t.Fatalf(
			"%d divergences, %d mismatches, %d audit mismatches",
			r.Placement.Divergences,
			r.Verify.Mismatches,
			r.Verify.AuditMismatches,
		)
	}
	compact, err := readTraceFileAs(
		path,
		workload.TraceOptions{VocabSize: opts.VocabSize, BlockTokens: 32},
	)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for g := range r.DP {
		want += workload.IdealHitTokens(
			workload.ShardForReplica(compact, r.DP, g),
			workload.IdealConfig{
				PageTokens: opts.PageTokens, VocabSize: opts.VocabSize, BatchRequests: opts.BatchRequests},
		)
	}
	achieved := r.Hits.L1Tokens + r.Hits.L2Tokens
	if r.Hits.IdealTokens != want || achieved == 0 || achieved > want {
		t.Fatalf(
			"ideal hit tokens %d, want %d; achieved %d, want in (0, ideal]",
			r.Hits.IdealTokens,
			want,
			achieved,
		)
	}
	var summary strings.Builder
	r.WriteSummary(&summary)
	if !strings.Contains(summary.String(), "; ideal hit ") {
		t.Errorf("the summary does not show the ideal hit rate:\n%s", summary.String())
	}
}
