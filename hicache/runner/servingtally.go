package runner

import (
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
)

// servingTallies are CP rank 0's distributions of its requests' times, in trace time, and the sums
// the report needs; the report adds them over the groups (every histogram is mergeable by its
// counts).
type servingTallies struct {
	ttft, queue, prefetch, load, prefill, ideal report.MsQuantiles
	// perRank: the ideal's requests again with per-rank copies' loads (replayPerRank)
	perRank                   report.MsQuantiles
	promptTokens              int64
	firstArrivalNs, lastEndNs int64
	// The ideal's own span and tokens (a virtual run times nothing else).
	idealPromptTokens, idealFirstNs, idealEndNs int64
	// The requests computed in more than one forward pass (chunked prefill), and the forward passes
	// they took: the run's, or a virtual run's ideal's.
	chunkedRequests, chunkedForwards int64
}

// chunked counts a request that took chunks forward passes.
func (t *servingTallies) chunked(chunks int) {
	if chunks > 1 {
		t.chunkedRequests++
		t.chunkedForwards += int64(chunks)
	}
}

// observe times one request whose first token came at endNs. Its parts add up to its TTFT: the
// queue until its step began, the L3 prefetch it was deferred for, the load wait before the
// compute, and the compute to the step's end (the modelled prefill, then what the step's consensus
// and its checks added).
func (t *servingTallies) observe(rc *requestClock, endNs int64) {
	if t.promptTokens == 0 {
		t.firstArrivalNs = rc.arrivalNs
	}
	t.promptTokens += rc.hit.PromptTokens
	t.firstArrivalNs, t.lastEndNs = min(t.firstArrivalNs, rc.arrivalNs), max(t.lastEndNs, endNs)
	t.ttft.ObserveNs(endNs - rc.arrivalNs)
	t.queue.ObserveNs(rc.firstStartNs - rc.arrivalNs)
	t.prefetch.ObserveNs(rc.stepStartNs - rc.firstStartNs)
	t.load.ObserveNs(rc.computeStartNs - rc.stepStartNs)
	t.prefill.ObserveNs(endNs - rc.computeStartNs)
	t.chunked(rc.chunks)
}

// replayIdeal replays the requests this rank timed on a virtual clock with a cache machinery that
// costs nothing: the same arrivals, the same hits, the same step rule and model, each request
// deferred for its L3 prefetch as the run deferred it (serving.PlanStep). Requests never served (a
// failed run) are left out. It returns each request's timing on the run's clock (a virtual run's:
// its own clock's, which forms its steps by the same rule at no cost and so must equal the ideal's)
// and on the ideal's, flushes left out.
func (c *servingClock) replayIdeal() (measured, ideal []serving.Timing) {
	records := make([]serving.Record, 0, len(c.order))
	for _, rc := range c.order {
		if rc.served && !rc.flush {
			measured = append(measured, rc.timing())
		}
		if rc.served || rc.flush {
			records = append(
				records,
				serving.Record{
					ArrivalNs: rc.arrivalNs,
					Hit:       rc.hit,
					Flush:     rc.flush,
					Deferred:  rc.deferred,
				},
			)
		}
	}
	r := serving.VirtualReplay(
		records,
		c.opts.Batching,
		c.prefill,
		c.opts.Links,
		c.opts.ClosedLoop(),
	)
	c.idealRecords, c.idealReplay = records, r
	for i, tm := range r.Requests {
		if records[i].Flush {
			continue
		}
		if c.t.idealPromptTokens == 0 {
			c.t.idealFirstNs = tm.ArrivalNs
		}
		ideal = append(ideal, tm)
		c.t.ideal.ObserveNs(tm.TTFTNs())
		if c.opts.Virtual {
			c.t.chunked(tm.Chunks) // a virtual run times no request of its own
		}
		c.t.idealPromptTokens += records[i].Hit.PromptTokens
		c.t.idealFirstNs, c.t.idealEndNs = min(
			c.t.idealFirstNs,
			tm.ArrivalNs,
		), max(
			c.t.idealEndNs,
			tm.EndNs,
		)
	}
	return measured, ideal
}

// replayPerRank replays the ideal's records (replayIdeal's) once more as the design the shared L2
// replaces would serve them, per-rank copies in the same node memory: each GPU loads a hit's whole
// KV over its own link (serving.Links.WholeCopies), at this run's hits. Their pools of 1/cp of the
// bytes would hold 1/cp of the tokens and hit less, which only a replay of the cache at that size
// can say: sweep runs it (--l2-design). MODELLED.
func (c *servingClock) replayPerRank() {
	links := c.opts.Links
	links.WholeCopies = true
	r := serving.VirtualReplay(
		c.idealRecords,
		c.opts.Batching,
		c.prefill,
		links,
		c.opts.ClosedLoop(),
	)
	for i, tm := range r.Requests {
		if !c.idealRecords[i].Flush {
			c.t.perRank.ObserveNs(tm.TTFTNs())
		}
	}
}
