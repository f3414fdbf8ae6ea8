package runner

import (
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// A sweep's modelled L3 (SERVING.md): beside each point's own hits, its TTFT with an L3 under its
// L2, replayed on the same virtual clock. The model is the simplest that says what an L3 of a given
// read rate buys: unbounded, it holds every block any earlier request began with (every block
// written before, flushes or not, as an L3 outlives them), in blocks of modelledL3BlockTokens from
// the prompt's start; a request's L3 hit is the whole blocks of its prefix so held, less what its
// L1 and L2 supplied, read at --l3-read-rate and loaded back, the request deferred a step for its
// prefetch as the core defers it, and only when that is at least the default prefetch threshold. No
// capacity, eviction or failed read limits it: it is the most an L3 at that rate could buy, which
// on a prefill bound by its weights' reads (a short prompt) can be a later first token than none.

// The modelled L3's block and prefetch threshold: --l3-block-tokens' and --l3-prefetch-threshold's
// defaults.
const (
	modelledL3BlockTokens     = 512
	modelledL3ThresholdTokens = 256
)

// replayWithL3 replays CP rank 0's requests again on the virtual clock, with the modelled L3's
// hits: seen is each request's prefix that earlier requests began with (workload.SeenPrefixTokens),
// in the workload's order.
func (c *servingClock) replayWithL3(seen []int64) *report.ModelledL3Serving {
	records := make([]serving.Record, 0, len(c.order))
	out := &report.ModelledL3Serving{
		ReadBytesPerSecond: c.opts.L3ReadBytesPerSecond,
		BlockTokens:        modelledL3BlockTokens,
	}
	request := 0
	for _, rc := range c.order {
		if rc.flush {
			records = append(records, serving.Record{ArrivalNs: rc.arrivalNs, Flush: true})
			continue
		}
		if !rc.served || request >= len(seen) {
			break // a failed run's unserved requests, and everything after them, are left out
		}
		h := rc.hit
		blocks := seen[request] / modelledL3BlockTokens * modelledL3BlockTokens
		// At least the prompt's last token is computed, as an engine computes it to sample the
		// first token; and as the core does, a request prefetches only when the L3 holds enough
		// more than its tree.
		h.L3 = max(0, min(blocks-h.L1-h.L2, h.PromptTokens-h.L1-h.L2-1))
		if h.L3 < modelledL3ThresholdTokens {
			h.L3 = 0
		}
		out.L3Tokens += h.L3
		records = append(
			records,
			serving.Record{ArrivalNs: rc.arrivalNs, Hit: h, Deferred: h.L3 > 0},
		)
		request++
	}
	r := serving.VirtualReplay(
		records,
		c.opts.Batching,
		c.prefill,
		c.opts.Links,
		c.opts.ClosedLoop(),
	)
	var ttft report.MsQuantiles
	for i, tm := range r.Requests {
		if !records[i].Flush {
			ttft.ObserveNs(tm.TTFTNs())
		}
	}
	out.TTFT = report.PercentilesOf(&ttft)
	out.PromptTokensPerSecond = serving.Summarize(records, r.Requests).PromptTokensPerSecond
	return out
}

// seenPrefixes is what the modelled L3 could hold for each of CP rank 0's requests.
func (rs *runState) seenPrefixes(events []workload.Event) []int64 {
	return workload.SeenPrefixTokens(
		events,
		workload.IdealConfig{PageTokens: rs.opts.PageTokens, VocabSize: rs.opts.VocabSize},
	)
}
