package runner

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/bound"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/workload"
)

// The OFFLINE bound on a run's hits (config.Options.OfflineBound, which sweep sets once per size;
// report.OfflineBound): CP rank 0 computes it over its replica's events beside the replay, as it
// does the ideal, and with the serving clock replays the bound's hits on a virtual clock.

// offlineBoundHits is the bound over CP rank 0's events, each request's hit tokens in the order
// the replay serves them.
type offlineBoundHits struct {
	res       bound.Result
	byRequest []int64
}

// checkOfflineBound refuses the bound in a job of more than one rank: it is a sweep's figure, one
// process's replica (the report carries world rank 0's alone).
func checkOfflineBound(job *spmd.Job, offline bool) error {
	if n := job.Topo.World.Size(); offline && n != 1 {
		return &spmd.JobWide{Err: fmt.Errorf(
			"the offline bound is computed for a run of one rank (sweep's), not %d", n)}
	}
	return nil
}

// startOfflineBound starts the bound's computation over CP rank 0's events (its replica's, cut by
// cfg as the ideal is), at L1's pages and the L2's slots together, beside the replay. With the
// serving clock it leaves out --flush-every's flushes, which fall where the run's own steps do: the
// bound, one for every policy at the size, is only higher without them (report.OfflineBound).
func (rs *runState) startOfflineBound(events []workload.Event, cfg workload.IdealConfig) {
	if !rs.opts.OfflineBound {
		return
	}
	if rs.opts.Serving != nil {
		cfg.FlushEverySteps = 0
	}
	capacity := rs.opts.DevicePages + rs.opts.L2Slots
	rs.boundHits = make(chan offlineBoundHits, 1)
	go func() {
		res, byRequest, err := bound.ByRequest(events, bound.Config{CapacityPages: capacity, Replay: cfg})
		if err != nil { // a capacity below 0 or pages of no token, which the options' checks refuse
			panic(fmt.Sprintf("the offline bound of checked options: %v", err))
		}
		rs.boundHits <- offlineBoundHits{res: res, byRequest: byRequest}
	}()
}

// finishOfflineBound waits for the bound and states it, with the serving clock its MODELLED TTFT.
func (rs *runState) finishOfflineBound() {
	if rs.boundHits == nil {
		return
	}
	b := <-rs.boundHits
	rs.offlineBound = &report.OfflineBound{
		CapacityPages: rs.opts.DevicePages + rs.opts.L2Slots,
		HitTokens:     b.res.HitTokens,
		PromptTokens:  b.res.PromptTokens,
	}
	if rs.clock != nil && rs.clock.root {
		rs.offlineBound.Serving = rs.clock.replayOfflineBound(b.byRequest)
	}
}

// replayOfflineBound replays CP rank 0's requests on the virtual clock with the bound's hits
// instead of the run's, each one an L1 hit, loaded at no cost (the bound says which pages hit, not
// from which tier), and no request deferred (the bound has no L3).
func (c *servingClock) replayOfflineBound(hits []int64) *report.OfflineBoundServing {
	records := make([]serving.Record, 0, len(c.order))
	request := 0
	for _, rc := range c.order {
		if rc.flush {
			records = append(records, serving.Record{ArrivalNs: rc.arrivalNs, Flush: true})
			continue
		}
		if !rc.served || request >= len(hits) {
			break // a failed run's unserved requests, and everything after them, are left out
		}
		h := serving.Hit{PromptTokens: rc.hit.PromptTokens, L1: hits[request]}
		records = append(records, serving.Record{ArrivalNs: rc.arrivalNs, Hit: h})
		request++
	}
	ttft, tokensPerSecond := c.replayFigures(records)
	return &report.OfflineBoundServing{
		TTFT:                  ttft,
		PromptTokensPerSecond: tokensPerSecond,
	}
}
