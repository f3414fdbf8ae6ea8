package bound

import (
	"flag"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/workload"
)

// The offline bound of a trace at several capacities, the measurement docs/POLICIES.md reports
// beside run's hit rates under each policy:
//
//	go test ./hicache/bound -run TestBoundOfATrace -v -bound.trace FILE -bound.capacity 4096+8192,...
//
// (a capacity is pages, a sum allowed: --device-pages + --l2-slots). Without -bound.trace it is
// skipped.
var (
	traceFlag      = flag.String("bound.trace", "", "a Mooncake trace whose offline bound to print")
	capacityFlag   = flag.String("bound.capacity", "4096", "capacities in pages, comma-separated, a+b")
	pageTokensFlag = flag.Int("bound.page-tokens", 64, "tokens per page")
)

func TestBoundOfATrace(t *testing.T) {
	if *traceFlag == "" {
		t.Skip("no -bound.trace")
	}
	f, err := os.Open(*traceFlag)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vocab := workload.DefaultSyntheticConfig().VocabSize
	events, err := workload.ReadTraceAs(f, *traceFlag, workload.TraceOptions{
		Format: workload.TraceMooncake, VocabSize: vocab, BlockTokens: 512,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range strings.Split(*capacityFlag, ",") {
		capacity := 0
		for _, term := range strings.Split(spec, "+") {
			n, err := strconv.Atoi(term)
			if err != nil {
				t.Fatal(err)
			}
			capacity += n
		}
		res, err := HitTokens(events, Config{CapacityPages: capacity, Replay: workload.IdealConfig{
			PageTokens: *pageTokensFlag, VocabSize: vocab, BatchRequests: 4,
		}})
		if err != nil {
			t.Fatal(err)
		}
		if res.HitTokens > res.IdealTokens {
			t.Fatalf("capacity %s: the bound %d passes the ideal %d", spec, res.HitTokens,
				res.IdealTokens)
		}
		t.Logf("capacity %s = %d pages: OFFLINE bound %d hit tokens (%.1f%%), ideal %.1f%%, "+
			"%d prompt tokens, %d requests, %d pages", spec, capacity, res.HitTokens,
			100*float64(res.HitTokens)/float64(res.PromptTokens),
			100*float64(res.IdealTokens)/float64(res.PromptTokens), res.PromptTokens,
			res.Requests, res.Pages)
	}
}
