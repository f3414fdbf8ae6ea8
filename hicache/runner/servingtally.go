package runner

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
)

// servingTallies are CP rank 0's distributions of its requests' times, in trace time, and the sums
// the report needs; the report adds them over the groups (every histogram is mergeable by its
// counts).
type servingTallies struct {
	ttft, queue, prefetch, load, prefill, ideal report.MsQuantiles
	// overrun: what the step's real work overran its model by, a part of prefill (the compute)
	overrun report.MsQuantiles
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
// compute, and the compute to its first token (the modelled prefill to its last chunk's end, then
// what the step's real work overran the model by: overrun, a part of it). Each part is 0 or more,
// so their means add up to the mean TTFT exactly (the sums are of integers).
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
	t.overrun.ObserveNs(endNs - rc.computeEndNs)
	t.chunked(rc.chunks)
}

// replayIdeal replays the requests this rank timed with a cache machinery that costs nothing, and
// returns each served request's timing on the run's clock and on the ideal's, in order, flushes
// left out. A run's ideal is its own steps again (serving.ReplaySteps): the same batches and
// passes, the same arrivals and hits, each request deferred for its L3 prefetch as the run
// deferred it, so that it is a floor for every request by construction and TTFT over ideal is
// what the machinery added to these steps. A virtual run (a sweep's point) has no run to replay:
// its ideal is serving.VirtualReplay, the steps formed anew, which its own clock, forming them by
// the same rule at no cost, equals. Either way a request the ideal is no floor for is an internal
// error (checkFloor).
func (c *servingClock) replayIdeal() (measured, ideal []serving.Timing, err error) {
	clocks, r, err := c.idealReplayOf()
	if err != nil {
		return nil, nil, err
	}
	for i, rc := range clocks {
		if !rc.served || rc.flush {
			continue // a flush, or a request a failure left unserved
		}
		tm := r.Requests[i]
		measured, ideal = append(measured, rc.timing()), append(ideal, tm)
		if c.t.idealPromptTokens == 0 {
			c.t.idealFirstNs = tm.ArrivalNs
		}
		c.t.ideal.ObserveNs(tm.TTFTNs())
		if c.opts.Virtual {
			c.t.chunked(tm.Chunks) // a virtual run times no request of its own
		}
		c.t.idealPromptTokens += rc.hit.PromptTokens
		c.t.idealFirstNs = min(c.t.idealFirstNs, tm.ArrivalNs)
		c.t.idealEndNs = max(c.t.idealEndNs, tm.EndNs)
	}
	return measured, ideal, c.checkFloor(clocks, r)
}

// idealReplayOf is the ideal's replay and the requests it replayed (replayIdeal says which), in
// order; it keeps the records for the replays after it (per-rank copies, the load).
func (c *servingClock) idealReplayOf() ([]*requestClock, serving.Replay, error) {
	var clocks []*requestClock
	var records []serving.Record
	if c.opts.Virtual {
		for _, rc := range c.order {
			if rc.served || rc.flush { // a failed run's unserved requests left out
				clocks, records = append(clocks, rc), append(records, rc.record())
			}
		}
		r := c.virtualReplay(records)
		c.idealClocks, c.idealRecords, c.idealReplay = clocks, records, r
		return clocks, r, nil
	}
	steps := make([]serving.FormedStep, len(c.ran))
	for k, s := range c.ran {
		steps[k] = serving.FormedStep{Records: len(s.formed), TwoPasses: s.twoPasses}
		for _, rc := range s.formed {
			clocks, records = append(clocks, rc), append(records, rc.record())
		}
	}
	r, err := serving.ReplaySteps(records, steps, c.opts.Batching, c.prefill, c.opts.Links)
	if err != nil {
		return nil, r, fmt.Errorf("the serving clock's ideal, CP rank 0's steps again: %w", err)
	}
	c.idealClocks, c.idealRecords, c.idealSteps, c.idealReplay = clocks, records, steps, r
	return clocks, r, nil
}

// checkFloor is the ideal's promise, checked for every request served: its first token and its
// TTFT on the ideal's clock no later than on the run's. A request that beats its ideal is a bug of
// the clocks, not a figure to print: the run fails naming it.
func (c *servingClock) checkFloor(clocks []*requestClock, r serving.Replay) error {
	for i, rc := range clocks {
		if !rc.served || rc.flush {
			continue
		}
		run, ideal := rc.timing(), r.Requests[i]
		if ideal.EndNs <= run.EndNs && ideal.TTFTNs() <= run.TTFTNs() {
			continue
		}
		return fmt.Errorf(
			"internal error: the serving clock's ideal is no floor for request %s (formed into step %d, deferred %v): its first token at %d ns of trace time on the ideal's clock, TTFT %d ns, against %d ns, TTFT %d ns, on the run's; the run's timing %+v, the ideal's %+v",
			rc.rid, rc.step, rc.deferred, ideal.EndNs, ideal.TTFTNs(), run.EndNs, run.TTFTNs(),
			run, ideal)
	}
	return nil
}

// replayPerRank replays the ideal's records (replayIdeal's) once more as the design the shared L2
// replaces would serve them, per-rank copies in the same node memory: each GPU loads a hit's whole
// KV over its own link (serving.Links.WholeCopies), at this run's hits and steps, so that it
// differs from the ideal by the loads alone (never sooner: a longer load ends no earlier). Their
// whole copies, on each GPU and in each rank's pool, would hold 1/cp of the tokens in L1 and L2
// and hit less, which only a replay of the cache at that size can say: sweep runs it
// (--l2-design). MODELLED.
func (c *servingClock) replayPerRank() error {
	links := c.opts.Links
	links.WholeCopies = true
	r, err := serving.ReplaySteps(c.idealRecords, c.idealSteps, c.opts.Batching, c.prefill, links)
	if err != nil {
		return fmt.Errorf("the per-rank copies' replay of CP rank 0's steps: %w", err)
	}
	for i, rc := range c.idealClocks {
		if rc.served && !rc.flush {
			c.t.perRank.ObserveNs(r.Requests[i].TTFTNs())
		}
	}
	return nil
}
