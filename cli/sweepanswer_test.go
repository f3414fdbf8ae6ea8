package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/sweep"
)

// TestSweepAnswersWhatToBuy: with the serving clock and a model the sweep ends with the answer,
// MODELLED: the L2 to buy a node in the model's bytes with its hit rate and TTFT, beside no L2 and
// beside per-rank copies of the same bytes (each size's per-rank point has 1/cp of its slots), the
// same with the modelled L3, and the load: at 200 requests a second the trace asks more than one
// group of 8 modelled H100s serves DeepSeek-V3 at, the queue is most of the TTFT, and more replicas
// bring the TTFT p50 under --ttft-target.
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
	for i, p := range res.PerRank {
		if shared := res.Points[i]; p.L2Slots != shared.L2Slots/8 || p.L2Bytes != shared.L2Bytes ||
			p.Design != sweep.DesignPerRank {
			t.Errorf("per-rank point %d: %d slots of %d bytes, want 1/8 of the shared %d slots of the same bytes",
				i, p.L2Slots, p.L2Bytes, shared.L2Slots)
		}
	}
	if l := a.Load; l.DemandPromptTokensPerSecond <= l.CapacityPromptTokensPerSecond ||
		l.QueueShareOfMeanTTFT <= 0.5 || l.Replicas < 2 || l.ReplicasTTFTP50 > 0.05 {
		t.Errorf("load %+v: want the demand over the capacity, the queue most of the TTFT, "+
			"and 2 or more replicas meeting 50 ms", l)
	}
}
