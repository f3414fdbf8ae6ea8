package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/sweep"
)

// TestSweepAnswersWhatToBuy: with the serving clock and a model the sweep ends with the answer,
// MODELLED: the L2 to buy a node in the model's bytes with its hit rate and TTFT, beside no L2 and
// beside per-rank copies of the same bytes (each size's per-rank point has whole copies: 1/cp of
// its L1 pages and of its slots, an L1 that here cannot hold the longest request, which its line
// says and the sweep runs), the same with the modelled L3, and the load: at 200 requests a second
// the trace asks more than one group of 8 modelled H100s serves DeepSeek-V3 at, the queue is most
// of the TTFT, and more replicas bring the TTFT p50 under --ttft-target, an estimate at the group's
// hits.
func TestSweepAnswersWhatToBuy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	out := singleton(t, append([]string{"sweep", "--json", path, "--l2-slots", "64,1024",
		"--device-pages", "256", "--gpu", "h100", "--prefill-model", "deepseek-v3",
		"--request-rate", "200", "--ttft-target", "50ms"}, sweepWorkload...)...)
	for _, want := range []string{
		"  no L2 (an L2 of one slot): hit", "  per-rank copies, L2 ",
		"# the answer, MODELLED (roofline: deepseek-v3",
		"  the L2 to buy: ", "of deepseek-v3's KV a node", "the smallest within 5% of the best TTFT p50",
		"; beside no L2: TTFT p50", "; beside per-rank copies of the same bytes",
		"  with the modelled L3 under it", "  load: the trace asks",
		"the queue is most of the TTFT", "DP replicas bring TTFT p50 under --ttft-target 50.0 ms",
		"the fewest of 1 to 64", "(an estimate at this group's hits: each replica keeps a full L1 and L2",
		"a GPU's L1 of 512 tokens, whole copies (SHORTER than the longest request",
		"(whole copies: a GPU's L1 of 512 tokens (SHORTER than the longest request",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the sweep lacks %q:\n%s", want, out)
		}
	}
	var res sweep.Result
	readJSON(t, path, &res)
	a := res.Answer
	if len(res.Points) != 2 || len(res.PerRank) != 2 || res.NoL2 == nil || a == nil ||
		a.L2 == nil || a.Load == nil {
		t.Fatalf("sweep %+v: want two points of each design, the baseline and the answer", res)
	}
	if strings.Contains(out, "lower bound") {
		t.Errorf("the sweep calls an estimate a lower bound:\n%s", out)
	}
	for i, p := range res.PerRank {
		if shared := res.Points[i]; p.L2Slots != shared.L2Slots/8 || p.L2Bytes != shared.L2Bytes ||
			p.Design != sweep.DesignPerRank {
			t.Errorf("per-rank point %d: %d slots of %d bytes, want 1/8 of the shared %d slots of the same bytes",
				i, p.L2Slots, p.L2Bytes, shared.L2Slots)
		}
		// 256 pages of 16 tokens, each GPU a part of each; per-rank, 32 pages of whole tokens.
		if shared := res.Points[i]; p.L1Pages != 32 || p.L1CapacityTokens != 512 ||
			shared.L1Pages != 256 || !shared.L1HoldsLongestRequest || p.L1HoldsLongestRequest ||
			res.LongestRequestTokens/16 <= 32 {
			t.Errorf("per-rank point %d: L1 %d pages (holds the longest request, %d tokens: %v), the "+
				"shared point's %d: want 32 (short of it) and 256", i, p.L1Pages,
				res.LongestRequestTokens, p.L1HoldsLongestRequest, shared.L1Pages)
		}
	}
	if l := a.Load; l.DemandPromptTokensPerSecond <= l.CapacityPromptTokensPerSecond ||
		l.QueueShareOfMeanTTFT <= 0.5 || l.Replicas < 2 || l.ReplicasTTFTP50 > 0.05 {
		t.Errorf("load %+v: want the demand over the capacity, the queue most of the TTFT, "+
			"and 2 or more replicas meeting 50 ms", l)
	}
}

// TestSweepAnswerNamesItsPolicy: with --l2-policy given the answer names the policy whose curve it
// chose from: the only one (here on the per-rank copies alone, which compare none), or the first
// of several, each of which then has its own size (TestSweepComparesPolicies).
func TestSweepAnswerNamesItsPolicy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	out := singleton(t, append([]string{"sweep", "--json", path, "--l2-slots", "64,1024",
		"--device-pages", "256", "--gpu", "h100", "--prefill-model", "deepseek-v3",
		"--request-rate", "200", "--l2-policy", "slru", "--l2-design", "per-rank"},
		sweepWorkload...)...)
	if want := "  the L2 to buy under slru: "; !strings.Contains(out, want) {
		t.Errorf("the sweep lacks %q:\n%s", want, out)
	}
	var res sweep.Result
	readJSON(t, path, &res)
	if res.Answer == nil || res.Answer.Policy != "slru" {
		t.Errorf("answer %+v: want it under slru", res.Answer)
	}
}
