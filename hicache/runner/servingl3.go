package runner

import (
	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// A sweep's modelled L3 (SERVING.md): beside each point's own hits, its TTFT with an L3 under its
// L2, replayed on the same virtual clock. The model is the simplest that says what an L3 of a given
// read rate buys: unbounded, it holds every block any earlier request began with (every block
// written before, flushes or not, as an L3 outlives them), in blocks of modelledL3BlockTokens from
// the prompt's start. A request's L3 hit is the blocks so held from the one its L1 and L2 hits end
// in, read at --l3-read-rate and loaded back, the request deferred a step for its prefetch as the
// core defers it, and only when that is at least the default prefetch threshold. It prefetches by
// the core's rule (cache.PrefetchLimits): at most half the L2 a prefetch, and the prefetches of a
// step together at most an eighth of it (the model resolves each step's prefetches by the next, as
// the step's consensus does when the reads finished in time). No capacity, eviction or failed read
// limits the L3 itself: it is the most an L3 at that rate could buy, which on a prefill bound by
// its weights' reads (a short prompt) can be a later first token than none.

// The modelled L3's block and prefetch threshold: --l3-block-tokens' and --l3-prefetch-threshold's
// defaults.
const (
	modelledL3BlockTokens     = 512
	modelledL3ThresholdTokens = 256
)

// replayWithL3 replays CP rank 0's requests again on the virtual clock, with the modelled L3's
// hits: seen is each request's prefix that earlier requests began with (workload.SeenPrefixTokens),
// in the workload's order; l2Slots and pageTokens are the L2's, which bound the prefetches.
func (c *servingClock) replayWithL3(seen []int64, l2Slots, pageTokens int) *report.ModelledL3Serving {
	records := make([]serving.Record, 0, len(c.order))
	out := &report.ModelledL3Serving{
		ReadBytesPerSecond: c.opts.L3ReadBytesPerSecond,
		BlockTokens:        modelledL3BlockTokens,
	}
	limits := newModelledPrefetch(l2Slots, pageTokens)
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
		h.L3 = limits.hit(rc.step, h, seen[request])
		out.L3Tokens += h.L3
		// the whole blocks of its prompt the L3 did not hold before it: written now
		whole := h.PromptTokens / modelledL3BlockTokens * modelledL3BlockTokens
		out.HeldTokens += max(0, whole-seen[request]/modelledL3BlockTokens*modelledL3BlockTokens)
		records = append(
			records,
			serving.Record{ArrivalNs: rc.arrivalNs, Hit: h, Deferred: h.L3 > 0},
		)
		request++
	}
	out.TTFT, out.PromptTokensPerSecond = c.replayFigures(records)
	return out
}

// virtualReplay replays records on the virtual clock of this run's batching, prefill, links and
// clients: the re-forming ideal of a virtual run, and the what-ifs (the modelled L3, the offline
// bound) of any.
func (c *servingClock) virtualReplay(records []serving.Record) serving.Replay {
	return serving.VirtualReplay(
		records,
		c.opts.Batching,
		c.prefill,
		c.opts.Links,
		c.opts.ClosedLoop(),
	)
}

// replayFigures is a virtual replay's TTFT percentiles (flushes left out, read as the report reads
// every TTFT) and prompt tokens a second.
func (c *servingClock) replayFigures(records []serving.Record) (report.Percentiles, float64) {
	r := c.virtualReplay(records)
	var ttft report.MsQuantiles
	for i, tm := range r.Requests {
		if !records[i].Flush {
			ttft.ObserveNs(tm.TTFTNs())
		}
	}
	return report.PercentilesOf(&ttft), serving.Summarize(records, r.Requests).PromptTokensPerSecond
}

// modelledPrefetch is the modelled L3's prefetches under the core's bounds: the blocks one may read,
// and those the step's prefetches hold so far of the most they may together.
type modelledPrefetch struct {
	perPrefetch, backlog int
	step                 int64
	held                 int
}

func newModelledPrefetch(l2Slots, pageTokens int) *modelledPrefetch {
	p := &modelledPrefetch{step: -1}
	p.perPrefetch, p.backlog = cache.PrefetchLimits(l2Slots, modelledL3BlockTokens/pageTokens)
	return p
}

// hit is the tokens a request of step step prefetches, its L1 and L2 hits h and seen tokens of its
// prefix held in the L3: whole blocks from the one its hits end in, as the core counts them, within
// the bounds, and never the prompt's last token, which an engine computes to sample the first
// token.
func (p *modelledPrefetch) hit(step int64, h serving.Hit, seen int64) int64 {
	if step != p.step {
		p.step, p.held = step, 0
	}
	const b = modelledL3BlockTokens
	usable := h.L1 + h.L2
	first := usable / b
	blocks := min(seen/b-first, int64(p.perPrefetch), int64(max(0, p.backlog-p.held)))
	tokens := max(0, min((first+blocks)*b-usable, h.PromptTokens-usable-1))
	if tokens < modelledL3ThresholdTokens {
		return 0
	}
	p.held += int(blocks)
	return tokens
}

// seenPrefixes is what the modelled L3 could hold for each of CP rank 0's requests.
func (rs *runState) seenPrefixes(events []workload.Event) []int64 {
	return workload.SeenPrefixTokens(
		events,
		workload.IdealConfig{PageTokens: rs.opts.PageTokens, VocabSize: rs.opts.VocabSize},
	)
}
