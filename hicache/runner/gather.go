package runner

import (
	"fmt"
	"reflect"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/mpi"
)

// The runner's half of the report: it gathers this rank's tallies (the core's counters, its own,
// the consensus statistics and latencies, the L3 store's, the serving clock's) over the World and
// hands them to package report (hicache/report), which states them: the summary, the JSON report,
// the metrics file. report, gatherGroups, gatherCounterViews and servingReport are World
// collectives; counters and l3Config read this rank alone.

// counters are this rank's tallies for the report: the core's, the runner's own (its L3 I/O), the
// store's and the consensus statistics (report.Tallies, which holds every field of the core's
// counters by name).
func (rs *runState) counters() report.Tallies {
	c := talliesOf(rs.core.Counters())
	mine := rs.io
	if rs.l3 != nil {
		sc := rs.l3.store.Counters()
		mine.L3Corrupt, mine.L3Evictions = sc.Corrupt, sc.Evictions
	}
	consensusTallies(&mine, &rs.cons.stats)
	for _, agg := range []string{"group", "rank"} {
		dst, src := c.Fields(agg), mine.Fields(agg)
		for i := range dst {
			*dst[i] += *src[i]
		}
	}
	return c
}

// report aggregates over World (a collective every rank calls): the replicated counters over CP
// rank 0 of each group, the per-rank ones over every rank, by their agg tags.
func (rs *runState) report() (*report.Report, error) {
	t := rs.job.Topo
	c := rs.counters()
	steps, err := rs.sumTallies(&c)
	if err != nil {
		return nil, err
	}
	timing, err := rs.slowestTimings()
	if err != nil {
		return nil, err
	}
	groups, err := rs.gatherGroups()
	if err != nil {
		return nil, err
	}
	r := &report.Report{
		Ranks:     t.World.Size(),
		CP:        t.CPSize,
		DP:        t.DPSize,
		Steps:     steps,
		Requests:  c.Requests,
		Layout:    rs.opts.Layout.String(),
		Policy:    rs.opts.Policy.String(),
		Transport: rs.cons.transport.Name(),
		Groups:    groups,
	}
	r.Fill(&c)
	r.Capacity = rs.opts.Capacity(t.CPSize, t.NodeSize)
	r.OfflineBound = rs.offlineBound // a one-rank run's (checkOfflineBound)
	setTimings(r, timing)
	if rs.l3 != nil {
		r.L3 = report.NewL3(rs.l3Config(), &c)
		setL3Timings(r.L3, timing)
	}
	if rs.clock != nil {
		if r.Serving, err = rs.servingReport(); err != nil {
			return nil, err
		}
	}
	if err := rs.gatherCounterViews(r); err != nil {
		return nil, err
	}
	return r, nil
}

// sumTallies sums c over World in place (a collective every rank calls), each group's replicated
// counters from its CP rank 0 alone and every rank's own counters, so that a group's are counted
// once; it returns the steps, summed over the CP ranks 0 the same way, in one all-reduce with
// them.
func (rs *runState) sumTallies(c *report.Tallies) (steps int64, err error) {
	t := rs.job.Topo
	group, rank := c.Fields("group"), c.Fields("rank")
	sums := make([]int64, 0, len(group)+len(rank)+1)
	for _, p := range group {
		v := *p
		if t.CPRank != 0 {
			v = 0
		}
		sums = append(sums, v)
	}
	for _, p := range rank {
		sums = append(sums, *p)
	}
	steps = rs.core.Step()
	if t.CPRank != 0 {
		steps = 0
	}
	sums = append(sums, steps)
	if err := t.World.AllreduceInt64(sums, sums, mpi.Sum); err != nil {
		return 0, err
	}
	for i, p := range append(group, rank...) {
		*p = sums[i]
	}
	return sums[len(sums)-1], nil
}

// slowestTimings are this run's timings, the slowest rank's of each (a max over World, a
// collective every rank calls), as integers the all-reduce carries: [0] the wall in us, [1] and
// [2] the step consensus's p50 and p99 in ns, [3] the placement comparisons' us, [4] their share
// of the wall in millionths, [5] and [6] the prefetch wait's p50 and p99 in ns, [7] and [8] the L3
// block reads' p50 and p99 in ns.
func (rs *runState) slowestTimings() ([]int64, error) {
	wall := time.Since(rs.start)
	assertSeconds := rs.cons.stats[cache.ObjectCompare].Seconds
	timing := []int64{
		wall.Microseconds(),
		int64(1e3 * rs.cons.stepUs.QuantileUs(0.50)),
		int64(1e3 * rs.cons.stepUs.QuantileUs(0.99)),
		int64(assertSeconds * 1e6),
		int64(1e6 * assertSeconds / max(wall.Seconds(), 1e-9)),
		int64(1e3 * rs.prefetchWait.QuantileUs(0.50)),
		int64(1e3 * rs.prefetchWait.QuantileUs(0.99)),
		int64(1e3 * rs.readLatency.QuantileUs(0.50)),
		int64(1e3 * rs.readLatency.QuantileUs(0.99)),
	}
	if err := rs.job.Topo.World.AllreduceInt64(timing, timing, mpi.Max); err != nil {
		return nil, err
	}
	return timing, nil
}

// setTimings sets r's wall seconds, step consensus latency in us and placement comparisons' us
// and share of the wall in percent from timing (slowestTimings' slots 0 to 4).
func setTimings(r *report.Report, timing []int64) {
	r.WallSeconds = float64(timing[0]) / 1e6
	r.WritingCheckUs.P50, r.WritingCheckUs.P99 = float64(timing[1])/1e3, float64(timing[2])/1e3
	r.PlacementAssertUs.Total = float64(timing[3])
	r.PlacementAssertUs.SharePct = float64(timing[4]) / 1e4
}

// setL3Timings sets l3's prefetch wait and block read latencies in us from timing (slowestTimings'
// slots 5 to 8).
func setL3Timings(l3 *report.L3Report, timing []int64) {
	l3.PrefetchWaitUs.P50, l3.PrefetchWaitUs.P99 = float64(timing[5])/1e3, float64(timing[6])/1e3
	l3.ReadUs.P50, l3.ReadUs.P99 = float64(timing[7])/1e3, float64(timing[8])/1e3
}

// consensusTallies copies the consensus statistics into the counters the report sums.
func consensusTallies(c *report.Tallies, stats *[consensusKinds]report.CollectiveStats) {
	c.ConsensusStepCalls = stats[cache.StepConsensus].Count + stats[cache.FlushConsensus].Count
	c.ConsensusCalls = c.ConsensusStepCalls + stats[cache.FinalConsensus].Count
	c.ConsensusSkipped = stats[cache.StepConsensus].Skipped + stats[cache.FlushConsensus].Skipped +
		stats[cache.FinalConsensus].Skipped
	c.L3PrefetchCalls = stats[cache.PrefetchCount].Count
}

// gatherGroups collects, over World, each CP group's hosts and per-kind collective stats.
func (rs *runState) gatherGroups() ([]report.GroupReport, error) {
	t := rs.job.Topo
	rows, err := t.Gather(transport.DescribeGPU(t))
	if err != nil {
		return nil, err
	}
	// Per kind: the stats, then the latency histogram, so that the metrics' histograms cost no
	// collective of their own.
	const perKind = 4 + report.LatencyHistWords
	mine := make([]int64, 0, perKind*int(consensusKinds))
	for k, s := range rs.cons.stats {
		mine = append(mine, s.Count, s.Skipped, int64(s.CommSizeMin), int64(s.CommSizeMax))
		mine = append(mine, rs.cons.latency[k].Words()...)
	}
	mine = append(mine, rs.core.Counters().L3HitTokens)
	all := make([]int64, len(mine)*t.World.Size())
	if err := t.World.AllgatherInt64(mine, all); err != nil {
		return nil, err
	}
	groups := make([]report.GroupReport, t.DPSize)
	for g := range groups {
		// Every group has the geometry of this one: the same nodes a group and parts a node (the
		// topology refuses groups whose nodes hold different shares), so each node's slab is this
		// rank's.
		groups[g] = report.GroupReport{
			Group:            g,
			Size:             t.CPSize,
			Collectives:      map[string]report.CollectiveStats{},
			Nodes:            make([]string, 0, t.GroupNodes),
			SlabBytesPerNode: rs.geometry.TotalBytes(),
		}
	}
	for r, row := range rows {
		gr := &groups[row.CPGroup]
		gr.Hosts = append(gr.Hosts, row.Host)
		if row.GroupNode == len(gr.Nodes) { // the node's first rank in CP-rank order names it
			gr.Nodes = append(gr.Nodes, row.Host)
		}
		if row.CPRank != 0 {
			continue
		}
		for k := cache.ConsensusKind(0); k < consensusKinds; k++ {
			v := all[r*len(mine)+perKind*int(k):]
			gr.Collectives[k.String()] = report.CollectiveStats{
				Count:       v[0],
				Skipped:     v[1],
				CommSizeMin: int(v[2]),
				CommSizeMax: int(v[3]),
			}
			gr.Latency = append(
				gr.Latency,
				report.KindLatency{Kind: k.String(), Hist: report.LatencyFromWords(v[4:perKind])},
			)
		}
		gr.L3HitTokens = all[(r+1)*len(mine)-1]
	}
	return groups, nil
}

// l3Config describes the run's L3 tier for the report's L3 section (report.NewL3 adds the counts).
func (rs *runState) l3Config() report.L3Report {
	o, ns := rs.opts.L3, rs.l3.store.Namespace()
	return report.L3Report{
		Dir:            o.Dir,
		Namespace:      fmt.Sprintf("%016x", ns.Fingerprint()),
		FilesPerBlock:  max(1, ns.Nodes),
		WritePolicy:    o.WritePolicy.String(),
		PrefetchPolicy: o.PrefetchPolicy.String(),
		BlockTokens:    o.BlockTokens,
		Bytes:          o.Bytes,
	}
}

// gatherCounterViews gathers, over World (a collective every rank calls), each CP group's
// replicated counters (from its CP rank 0) and each rank's own, for the end-of-run metrics file's
// series by group and rank; and gives the report the run's provenance. Without --metrics-file only
// the latter.
func (rs *runState) gatherCounterViews(r *report.Report) error {
	r.Provenance = rs.opts.Provenance
	if rs.opts.MetricsPath == "" {
		return nil
	}
	t := rs.job.Topo
	c := rs.counters()
	group, rank := c.Fields("group"), c.Fields("rank")
	mine := make([]int64, 0, len(group)+len(rank)+1)
	for _, p := range append(group, rank...) {
		mine = append(mine, *p)
	}
	mine = append(mine, rs.core.Step())
	all := make([]int64, len(mine)*t.World.Size())
	if err := t.World.AllgatherInt64(mine, all); err != nil {
		return err
	}
	for worldRank := 0; worldRank < t.World.Size(); worldRank++ {
		row := all[worldRank*len(mine) : (worldRank+1)*len(mine)]
		cpGroup := worldRank / t.CPSize // CP groups are consecutive world ranks
		var gc, rc report.Tallies
		for i, p := range gc.Fields("group") {
			*p = row[i]
		}
		for i, p := range rc.Fields("rank") {
			*p = row[len(group)+i]
		}
		rankReport := &report.Report{CP: t.CPSize, DP: t.DPSize}
		rankReport.Fill(&rc)
		if rs.l3 != nil {
			rankReport.L3 = report.NewL3(rs.l3Config(), &rc)
		}
		r.RankViews = append(
			r.RankViews,
			report.CounterView{CPGroup: cpGroup, WorldRank: worldRank, Report: rankReport},
		)
		if worldRank%t.CPSize != 0 {
			continue
		}
		groupReport := &report.Report{CP: t.CPSize, DP: t.DPSize, Steps: row[len(row)-1]}
		groupReport.Fill(&gc)
		if rs.l3 != nil {
			groupReport.L3 = report.NewL3(rs.l3Config(), &gc)
		}
		r.GroupViews = append(
			r.GroupViews,
			report.CounterView{CPGroup: cpGroup, WorldRank: worldRank, Report: groupReport},
		)
	}
	return nil
}

// servingReport adds the groups' serving tallies over World (a collective every rank calls, with
// the clock on).
func (rs *runState) servingReport() (*report.ServingReport, error) {
	c := rs.clock
	t := &c.t
	hists := []*report.MsQuantiles{
		&t.ttft, &t.ideal, &t.queue, &t.prefetch, &t.load, &t.prefill, &t.perRank, &t.overrun,
	}
	const perHist = report.MsQuantilesWords
	// requests, tokens/s and ideal tokens/s (x1000), the steps' measured and modelled ns, the
	// chunked requests and their forward passes
	var sums [7]int64
	words := make([]int64, 0, len(hists)*perHist+len(sums))
	for _, h := range hists {
		words = append(words, h.Words()...)
	}
	if c.root {
		sums[0] = t.ideal.Count()
		sums[1] = int64(1e3 * perSecond(t.promptTokens, t.lastEndNs-t.firstArrivalNs))
		sums[2] = int64(1e3 * perSecond(t.idealPromptTokens, t.idealEndNs-t.idealFirstNs))
		sums[3], sums[4] = c.stepsNs, c.modelledNs
		sums[5], sums[6] = t.chunkedRequests, t.chunkedForwards
	}
	words = append(words, sums[:]...)
	if err := rs.job.Topo.World.AllreduceInt64(words, words, mpi.Sum); err != nil {
		return nil, err
	}
	for i, h := range hists {
		h.SetWords(words[i*perHist : (i+1)*perHist])
	}
	copy(sums[:], words[len(hists)*perHist:])
	o := c.opts
	r := &report.ServingReport{
		Model:     o.ModelName,
		BreakEven: o.BreakEven(),
		TimeScale: o.TimeScale,
		Virtual:   o.Virtual,
		Requests:  sums[0],
		TTFT: report.PercentilesOf(
			&t.ttft,
		),
		IdealTTFT: report.PercentilesOf(&t.ideal),
		QueueWait: report.PercentilesOf(&t.queue),
		PrefetchWait: report.PercentilesOf(
			&t.prefetch,
		),
		LoadWait: report.PercentilesOf(&t.load),
		Compute:  report.PercentilesOf(&t.prefill),
		Overrun:  report.PercentilesOf(&t.overrun),
		PromptTokensPerSecond: float64(
			sums[1],
		) / 1e3,
		IdealPromptTokensPerSecond: float64(sums[2]) / 1e3,
		ChunkTokens:                o.Batching.StepTokens,
		ChunkedRequests:            sums[5],
		ChunkedForwardPasses:       sums[6],
	}
	r.TTFTHist, r.IdealHist, r.ModelledL3, r.Load = t.ttft, t.ideal, c.withL3, c.load
	if t.perRank.Count() > 0 {
		r.PerRankCopies = &report.PerRankServing{TTFT: report.PercentilesOf(&t.perRank)}
	}
	if r.IdealTTFT.P50 > 0 {
		r.MeasuredOverIdealP50 = r.TTFT.P50 / r.IdealTTFT.P50
	}
	if sums[3] > 0 {
		r.MachinerySharePct = 100 * float64(max(0, sums[3]-sums[4])) / float64(sums[3])
	}
	return r, nil
}

func perSecond(tokens, spanNs int64) float64 {
	if spanNs <= 0 {
		return 0
	}
	return float64(tokens) / (float64(spanNs) / 1e9)
}

// talliesOf is the core's counters as the report's tallies, field by field by name: report.Tallies
// holds every field of cache.Counters (TestTalliesHoldEveryCounter), and a field it lacked would
// panic here at the first run.
func talliesOf(c cache.Counters) report.Tallies {
	var t report.Tallies
	src, dst := reflect.ValueOf(c), reflect.ValueOf(&t).Elem()
	for i := range src.NumField() {
		dst.FieldByName(src.Type().Field(i).Name).SetInt(src.Field(i).Int())
	}
	return t
}

// kindLatencies are the consensus latencies by kind, named, for the report's groups.
func kindLatencies(hists *[consensusKinds]report.LatencyHist) []report.KindLatency {
	out := make([]report.KindLatency, 0, consensusKinds)
	for k := cache.ConsensusKind(0); k < consensusKinds; k++ {
		out = append(out, report.KindLatency{Kind: k.String(), Hist: hists[k]})
	}
	return out
}
