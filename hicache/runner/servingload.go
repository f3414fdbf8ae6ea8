package runner

import (
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// A virtual replay's load (a sweep's point; SERVING.md, "The load"): the trace's demand beside what
// the group serves at the point's hits, the queue's share of the TTFT, and the DP replicas that
// bring the TTFT p50 under --ttft-target, found by replaying the virtual clock with the requests
// split over them as run splits a workload (workload.ReplicaForRID). All of it MODELLED.

// replayServing replays, on CP rank 0 with the serving clock, its requests on virtual clocks: the
// ideal (the same hits, a machinery that costs nothing); a run's per-rank copies, with a model's
// loads to move over a group of several GPUs; and a virtual run's load and modelled L3.
// A request the ideal is no floor for fails the run (replayIdeal).
func (rs *runState) replayServing(events []workload.Event) error {
	c := rs.clock
	measured, ideal, err := c.replayIdeal()
	if f := rs.testing.ServingTimings; f != nil {
		f(measured, ideal)
	}
	if err != nil {
		return err
	}
	if !c.opts.Virtual && rs.opts.SizingModel() != "" && rs.job.Topo.CPSize > 1 {
		if err := c.replayPerRank(); err != nil { // beside the shared pool
			return err
		}
	}
	if c.opts.Virtual {
		c.load = c.loadOf(events)
		c.withL3 = c.replayWithL3(rs.seenPrefixes(events), rs.opts.L2Slots, rs.opts.PageTokens)
	}
	return nil
}

// maxReplicas bounds the replicas the search tries, every number from 1 to it: past 64 CP groups
// the answer is "more".
const maxReplicas = 64

// loadOf is CP rank 0's load over the ideal's replay of events (its whole workload, in order: one
// record of replayIdeal's for each, when every event was served).
func (c *servingClock) loadOf(events []workload.Event) *report.ServingLoad {
	records, r := c.idealRecords, c.idealReplay
	l := serving.LoadOf(records, r, c.opts.ClosedLoop())
	out := &report.ServingLoad{
		DemandPromptTokensPerSecond:   l.DemandTokensPerSecond,
		CapacityPromptTokensPerSecond: l.CapacityTokensPerSecond,
		QueueShareOfMeanTTFT:          l.QueueShare,
		TTFTTargetSeconds:             c.opts.TTFTTargetSeconds,
	}
	if c.opts.TTFTTargetSeconds <= 0 || len(records) != len(events) {
		return out // no target, or a replay that did not serve its whole workload
	}
	replicaOf := func(i, k int) int { return workload.ReplicaForRID(events[i].Request.RID, k) }
	found := serving.ReplicasFor(
		records,
		replicaOf,
		c.opts.Batching,
		c.prefill,
		c.opts.Links,
		c.opts.ClosedLoop(),
		serving.Nanoseconds(c.opts.TTFTTargetSeconds),
		maxReplicas,
		report.SortedSeconds, // as the point's own TTFT p50 beside it is read
	)
	out.Replicas, out.ReplicasTTFTP50, out.ReplicasMax = found.Replicas, found.TTFTP50, found.Max
	return out
}
