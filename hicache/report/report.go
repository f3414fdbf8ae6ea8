package hicache

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/mpi"
)

// LatencyUs is a latency's median and 99th percentile, in microseconds.
type LatencyUs struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// Report is the run's result aggregated over every rank; world rank 0 prints it and writes it as JSON.
type Report struct {
	Ranks     int    `json:"ranks"`
	CP        int    `json:"cp"`
	DP        int    `json:"dp"`
	Steps     int64  `json:"steps"`
	Requests  int64  `json:"requests"`
	Layout    string `json:"layout"`
	Policy    string `json:"write_policy"`
	Transport string `json:"collective"`
	// Capacity is each tier's size in tokens and bytes (per CP group for L2, per rank for L1).
	Capacity  Capacity `json:"capacity"`
	Placement struct {
		Checks      int64 `json:"checks"`
		Skipped     int64 `json:"skipped"` // asserts not run: a CP group of one rank has nothing to compare
		Divergences int64 `json:"divergences"`
	} `json:"placement"`
	Verify struct {
		PagesChecked    int64 `json:"pages_checked"`
		Mismatches      int64 `json:"mismatches"`
		AuditObjects    int64 `json:"audit_objects"`    // committed objects checked whole, every rank's parts: once a node of its group
		AuditMismatches int64 `json:"audit_mismatches"` // of those, objects with a wrong byte
		CopyErrors      int64 `json:"copy_errors"`
	} `json:"verify"`
	// Consensus counts the step consensus, the one all-reduce of a fixed vector that carries everything a CP group
	// agrees on (commit, load-backs, digest, errors), over every group.
	Consensus struct {
		Calls        int64   `json:"calls"`          // step, flush and final calls
		CallsPerStep float64 `json:"calls_per_step"` // calls inside the steps (step and flush) per step: 1 without flushes
		Skipped      int64   `json:"skipped"`        // calls skipped because a CP group has one rank
	} `json:"consensus"`
	Hits struct {
		L1Tokens   int64 `json:"l1_tokens"`
		L2Tokens   int64 `json:"l2_tokens"`
		L3Tokens   int64 `json:"l3_tokens"` // L2 hits on blocks prefetched from the L3 for the request (not in l2_tokens)
		MissTokens int64 `json:"miss_tokens"`
		// IdealTokens: an unbounded cache's hits over the same events (whole pages of a prefix an earlier request
		// of the replica began with since the last flush): the bound L1 + L2 hits approach as the cache grows. An L3
		// outlives flushes and jobs, so with one L1 + L2 + L3 hits can exceed it.
		IdealTokens int64 `json:"ideal_tokens"`
	} `json:"hits"`
	Backup struct {
		Reserved      int64 `json:"reserved"`
		Committed     int64 `json:"committed"`
		ReserveMisses int64 `json:"reserve_misses"`
		L2Evictions   int64 `json:"l2_evictions"`
		Throttles     int64 `json:"throttles"` // steps that first drained backups pinning over half of L1
	} `json:"backup"`
	L1 struct {
		Evictions     int64 `json:"evictions"`
		LoadBacks     int64 `json:"load_backs"`
		UncachedPages int64 `json:"uncached_pages"`
		// UncachedOversizePages: of those, the pages of requests longer than L1, which could never be cached whole.
		UncachedOversizePages int64 `json:"uncached_oversize_pages"`
	} `json:"l1"`
	Bytes struct {
		D2H int64 `json:"d2h"`
		H2D int64 `json:"h2d"`
	} `json:"bytes"`
	Flushes     int64   `json:"flushes"`
	WallSeconds float64 `json:"wall_seconds"`
	// WritingCheckUs is the latency of the step consensus, which carries writing_check (and everything else agreed
	// in a step).
	WritingCheckUs LatencyUs `json:"writing_check_us"`
	// PlacementAssertUs is the time the slowest rank spent in object-by-object placement comparisons (the digest
	// rides in every consensus at no extra call): an upper bound of what the comparisons cost the run (it includes
	// waiting for skewed ranks, which the next collective would absorb anyway).
	PlacementAssertUs struct {
		Total    float64 `json:"total"`
		SharePct float64 `json:"share_pct"` // of wall_seconds
	} `json:"placement_assert_us"`
	// L3 is the storage tier's, when the run had one (--l3-dir).
	L3 *L3Report `json:"l3,omitempty"`
	// Serving is the serving clock's, when the run had one: time to first token, all of it modelled.
	Serving *ServingReport `json:"serving,omitempty"`
	Groups  []GroupReport  `json:"groups"`
	// Result is the summary's last line: OK, OK but what was not covered, or FAILED (set by WriteJSON).
	Result string `json:"result"`
	// Failure is what ended a run that failed part-way (runfailure.go); nil when the replay ran to its end.
	Failure               *FailureReport `json:"failure,omitempty"`
	Provenance            *Provenance    `json:"provenance,omitempty"` // what produced the report (provenance.go)
	groupViews, rankViews []counterView  // the metrics file's counters by CP group and rank (gatherCounterViews)
}

// GroupReport is one CP group: its members' hosts, the nodes it spans with each node's slab, and the collectives
// it ran, with their communicator sizes.
type GroupReport struct {
	Group int      `json:"group"`
	Size  int      `json:"size"`
	Hosts []string `json:"hosts"`
	// Nodes are the nodes the group spans, in the order of their lowest CP rank; each holds one slab with the
	// parts of its share of the group's ranks, SlabBytesPerNode bytes (1/len(Nodes) of a one-node group's).
	Nodes            []string                    `json:"nodes"`
	SlabBytesPerNode int64                       `json:"slab_bytes_per_node"`
	Collectives      map[string]CollectiveStats  `json:"collectives"`
	L3HitTokens      int64                       `json:"l3_hit_tokens"` // this replica's prompt tokens served from L3 blocks
	latency          [consensusKinds]latencyHist // CP rank 0's consensus latencies by kind: the metrics file's histograms
}

// MarshalJSON names CollectiveStats' fields in the report's style.
func (s CollectiveStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(map[string]any{"count": s.Count, "skipped": s.Skipped, "comm_size": s.CommSizeMax, "comm_size_min": s.CommSizeMin})
}

// counters are this rank's tallies for the report: the core's, the runner's own (its L3 I/O), the store's and the
// consensus statistics, each field defined once (cache.Counters).
func (rs *runState) counters() cache.Counters {
	c := rs.core.Counters()
	mine := rs.io
	if rs.l3 != nil {
		sc := rs.l3.store.Counters()
		mine.L3Corrupt, mine.L3Evictions = sc.Corrupt, sc.Evictions
	}
	consensusTallies(&mine, &rs.cons.stats)
	for _, agg := range []string{"group", "rank"} {
		dst, src := c.CounterFields(agg), mine.CounterFields(agg)
		for i := range dst {
			*dst[i] += *src[i]
		}
	}
	return c
}

// counts is counters, for validate's rows (after the pass).
func (rs *runState) counts() *cache.Counters {
	c := rs.counters()
	return &c
}

// report aggregates over World (a collective every rank calls): the replicated counters over CP rank 0 of each
// group, the per-rank ones over every rank, by their agg tags.
func (rs *runState) report() (*Report, error) {
	t := rs.job.Topo
	c := rs.counters()
	group, rank := c.CounterFields("group"), c.CounterFields("rank")
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
	steps := rs.core.Step()
	if t.CPRank != 0 {
		steps = 0
	}
	sums = append(sums, steps)
	if err := t.World.AllreduceInt64(sums, sums, mpi.Sum); err != nil {
		return nil, err
	}
	for i, p := range append(group, rank...) {
		*p = sums[i]
	}
	steps = sums[len(sums)-1]
	wall := time.Since(rs.start)
	assertSeconds := rs.cons.stats[cache.ObjectCompare].Seconds
	timing := []int64{wall.Microseconds(), int64(1e3 * rs.cons.stepUs.quantileUs(0.50)), int64(1e3 * rs.cons.stepUs.quantileUs(0.99)),
		int64(assertSeconds * 1e6), int64(1e6 * assertSeconds / max(wall.Seconds(), 1e-9)),
		int64(1e3 * rs.prefetchWait.quantileUs(0.50)), int64(1e3 * rs.prefetchWait.quantileUs(0.99)),
		int64(1e3 * rs.readLatency.quantileUs(0.50)), int64(1e3 * rs.readLatency.quantileUs(0.99))}
	if err := t.World.AllreduceInt64(timing, timing, mpi.Max); err != nil {
		return nil, err
	}
	groups, err := rs.gatherGroups()
	if err != nil {
		return nil, err
	}
	r := &Report{Ranks: t.World.Size(), CP: t.CPSize, DP: t.DPSize, Steps: steps, Requests: c.Requests,
		Layout: rs.opts.Layout.String(), Policy: rs.opts.Policy.String(), Transport: rs.cons.transport.Name(), Groups: groups}
	r.fill(&c)
	r.Capacity = rs.opts.capacity(t.CPSize)
	r.WallSeconds = float64(timing[0]) / 1e6
	r.WritingCheckUs.P50, r.WritingCheckUs.P99 = float64(timing[1])/1e3, float64(timing[2])/1e3
	r.PlacementAssertUs.Total, r.PlacementAssertUs.SharePct = float64(timing[3]), float64(timing[4])/1e4
	if rs.l3 != nil {
		r.L3 = newL3Report(&c, rs.opts.L3, rs.l3.store.Namespace())
		r.L3.PrefetchWaitUs.P50, r.L3.PrefetchWaitUs.P99 = float64(timing[5])/1e3, float64(timing[6])/1e3
		r.L3.ReadUs.P50, r.L3.ReadUs.P99 = float64(timing[7])/1e3, float64(timing[8])/1e3
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

func (r *Report) fill(c *cache.Counters) {
	r.Placement.Checks, r.Placement.Divergences = c.PlacementChecks, c.Divergences
	if r.CP == 1 { // the consensus skips every collective of a one-rank group: no assert compared anything
		r.Placement.Checks, r.Placement.Skipped = 0, c.ConsensusSkipped
	}
	r.Verify.PagesChecked, r.Verify.Mismatches = c.PagesChecked, c.Mismatches
	r.Hits.L1Tokens, r.Hits.L2Tokens, r.Hits.MissTokens = c.L1HitTokens, c.L2HitTokens, c.MissTokens
	r.Hits.IdealTokens = c.IdealHitTokens
	r.Hits.L3Tokens = c.L3HitTokens
	r.Backup.Reserved, r.Backup.Committed, r.Backup.ReserveMisses, r.Backup.L2Evictions = c.BackupReserved, c.BackupCommitted, c.ReserveMisses, c.L2Evictions
	r.Backup.Throttles = c.WriteThrottles
	r.L1.Evictions, r.L1.LoadBacks, r.L1.UncachedPages, r.L1.UncachedOversizePages = c.L1Evictions, c.LoadBacks, c.Uncached, c.UncachedOversize
	r.Bytes.D2H, r.Bytes.H2D = c.BytesD2H, c.BytesH2D
	r.Flushes = c.Flushes
	r.Verify.AuditObjects, r.Verify.AuditMismatches, r.Verify.CopyErrors = c.AuditObjects, c.AuditMismatches, c.CopyErrs
	r.Consensus.Calls, r.Consensus.Skipped = c.ConsensusCalls, c.ConsensusSkipped
	if r.Steps > 0 {
		r.Consensus.CallsPerStep = float64(c.ConsensusStepCalls) / float64(r.Steps)
	}
}

// consensusTallies copies the consensus statistics into the counters the report sums.
func consensusTallies(c *cache.Counters, stats *[consensusKinds]CollectiveStats) {
	c.ConsensusStepCalls = stats[cache.StepConsensus].Count + stats[cache.FlushConsensus].Count
	c.ConsensusCalls = c.ConsensusStepCalls + stats[cache.FinalConsensus].Count
	c.ConsensusSkipped = stats[cache.StepConsensus].Skipped + stats[cache.FlushConsensus].Skipped + stats[cache.FinalConsensus].Skipped
	c.L3PrefetchCalls = stats[cache.PrefetchCount].Count
}

// gatherGroups collects, over World, each CP group's hosts and per-kind collective stats.
func (rs *runState) gatherGroups() ([]GroupReport, error) {
	t := rs.job.Topo
	rows, err := t.Gather(transport.DescribeGPU(t))
	if err != nil {
		return nil, err
	}
	// Per kind: the stats, then the latency histogram, so that the metrics' histograms cost no collective of their own.
	const perKind = 4 + latencyHistWords
	mine := make([]int64, 0, perKind*int(consensusKinds))
	for k, s := range rs.cons.stats {
		mine = append(mine, s.Count, s.Skipped, int64(s.CommSizeMin), int64(s.CommSizeMax))
		mine = append(mine, rs.cons.latency[k].words()...)
	}
	mine = append(mine, rs.core.Counters().L3HitTokens)
	all := make([]int64, len(mine)*t.World.Size())
	if err := t.World.AllgatherInt64(mine, all); err != nil {
		return nil, err
	}
	groups := make([]GroupReport, t.DPSize)
	for g := range groups {
		// Every group has the geometry of this one: the same nodes a group and parts a node (the topology
		// refuses groups whose nodes hold different shares), so each node's slab is this rank's.
		groups[g] = GroupReport{Group: g, Size: t.CPSize, Collectives: map[string]CollectiveStats{},
			Nodes: make([]string, 0, t.GroupNodes), SlabBytesPerNode: rs.geometry.TotalBytes()}
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
			gr.Collectives[k.String()] = CollectiveStats{Count: v[0], Skipped: v[1], CommSizeMin: int(v[2]), CommSizeMax: int(v[3])}
			gr.latency[k] = latencyFromWords(v[4:perKind])
		}
		gr.L3HitTokens = all[(r+1)*len(mine)-1]
	}
	return groups, nil
}

// WriteJSON writes the report to path (--report), whole or not at all.
func (r *Report) WriteJSON(path string) error {
	r.Result = r.verdict()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return outfile.Write("report", path, append(b, '\n'))
}

// WriteSummary prints the human summary a new user reads first.
func (r *Report) WriteSummary(w io.Writer) {
	pct := func(part, whole int64) float64 {
		if whole == 0 {
			return 0
		}
		return 100 * float64(part) / float64(whole)
	}
	tokens := r.Hits.L1Tokens + r.Hits.L2Tokens + r.Hits.L3Tokens + r.Hits.MissTokens
	fmt.Fprintf(w, "# cphicache run: %s, cp %d, dp %d, layout %s, %s, step consensus over %s\n", spmd.Plural(r.Ranks, "rank"), r.CP, r.DP, r.Layout, r.Policy, r.Transport)
	fmt.Fprintf(w, "  requests %d in %d steps, %.2f s wall\n", r.Requests, r.Steps, r.WallSeconds)
	r.writeCapacity(w)
	r.writeNodes(w)
	l3Hits := ""
	if r.L3 != nil {
		l3Hits = fmt.Sprintf(", L3 hit %d (%.1f%%)", r.Hits.L3Tokens, pct(r.Hits.L3Tokens, tokens))
	}
	// The ideal counts an unbounded cache over this job's events since each flush; an L3 outlives flushes and
	// jobs, so with one the hits can exceed it, and the summary names it for what it is.
	ideal := "ideal hit %d (%.1f%%, an unbounded cache)"
	if r.L3 != nil {
		ideal = "in-job ideal %d (%.1f%%, an unbounded L1 + L2 since the last flush; the L3 can exceed it)"
	}
	fmt.Fprintf(w, "  prompt tokens: L1 hit %d (%.1f%%), L2 hit %d (%.1f%%)%s, computed %d (%.1f%%); "+ideal+"\n",
		r.Hits.L1Tokens, pct(r.Hits.L1Tokens, tokens), r.Hits.L2Tokens, pct(r.Hits.L2Tokens, tokens), l3Hits, r.Hits.MissTokens, pct(r.Hits.MissTokens, tokens),
		r.Hits.IdealTokens, pct(r.Hits.IdealTokens, tokens))
	uncached := ""
	if text := r.uncachedText(); text != "" {
		uncached = "; " + text + " (" + r.uncachedWhy() + ")"
	}
	fmt.Fprintf(w, "  L2 backups: %d reserved, %d committed, %d skipped on a full pool, %d L2 evictions, %d steps throttled; %d L1 evictions, %d load-backs%s\n",
		r.Backup.Reserved, r.Backup.Committed, r.Backup.ReserveMisses, r.Backup.L2Evictions, r.Backup.Throttles, r.L1.Evictions, r.L1.LoadBacks, uncached)
	r.L3.writeSummary(w)
	r.Serving.writeSummary(w)
	fmt.Fprintf(w, "  copies: %.1f MiB device-to-host, %.1f MiB host-to-device; %s\n", float64(r.Bytes.D2H)/(1<<20), float64(r.Bytes.H2D)/(1<<20), spmd.Count(r.Flushes, "flush", "flushes"))
	placement := fmt.Sprintf("%s, object comparisons %.2f%% of the wall time (slowest rank), %s",
		spmd.Count(r.Placement.Checks, "digest check", "digest checks"), r.PlacementAssertUs.SharePct, spmd.Count(r.Placement.Divergences, "divergence", "divergences"))
	if r.CP == 1 {
		placement = fmt.Sprintf("assert skipped (cp 1: no other rank to compare with), %d consensus calls skipped", r.Placement.Skipped)
	}
	verify := fmt.Sprintf("%s checked, %s", spmd.Count(r.Verify.PagesChecked, "load-back page", "load-back pages"), spmd.Count(r.Verify.Mismatches, "mismatch", "mismatches"))
	if r.Verify.PagesChecked == 0 {
		verify = "NOTHING VERIFIED: no page was loaded back from L2"
	}
	fmt.Fprintf(w, "  step consensus: %d calls, %.2f per step; latency p50 %.1f us, p99 %.1f us (slowest rank)\n",
		r.Consensus.Calls, r.Consensus.CallsPerStep, r.WritingCheckUs.P50, r.WritingCheckUs.P99)
	fmt.Fprintf(w, "  placement: %s\n", placement)
	audit := "committed objects checked whole (every rank's parts)"
	if r.spansNodes() {
		audit = "audits of committed objects, one on each node of their group (its ranks' parts)"
	}
	fmt.Fprintf(w, "  verify: %s; audit: %d %s, %d wrong\n", verify, r.Verify.AuditObjects, audit, r.Verify.AuditMismatches)
	result := r.verdict()
	switch f := r.Failure; {
	case f != nil && f.Step >= 0:
		result += fmt.Sprintf(": %s at step %d, reported by world rank %d (CP group %d, CP rank %d): %s", f.Check, f.Step, f.WorldRank, f.CPGroup, f.CPRank, f.Message)
	case f != nil:
		result += fmt.Sprintf(": %s; %s", f.Check, f.Message)
	}
	fmt.Fprintf(w, "  result: %s\n", result)
}

// writeCapacity states each tier in tokens and bytes, and says plainly when the copies are scaled down.
func (r *Report) writeCapacity(w io.Writer) {
	c := r.Capacity
	model := "per token"
	if c.Model != "" {
		model = "per token of " + c.Model
	}
	fmt.Fprintf(w, "  capacity: L2 %s = %s = %s per CP group; L1 %s = %s = %s per rank; KV %s %s\n",
		spmd.Count(c.L2Slots, "slot", "slots"), spmd.Count(c.L2Tokens, "token", "tokens"), sizing.FormatBytes(c.L2Bytes), spmd.Count(c.DevicePages, "page", "pages"), spmd.Count(c.DeviceTokens, "token", "tokens"), sizing.FormatBytes(c.DeviceBytes), sizing.FormatBytes(c.TokenBytes), model)
	if c.Scaled {
		fmt.Fprintf(w, "  copies SCALED DOWN: %s copied per token instead of %s; tokens and hit counts are the real sizes', bytes copied and the slab (%s) are not\n",
			sizing.FormatBytes(c.CopiedTokenBytes), sizing.FormatBytes(c.TokenBytes), sizing.FormatBytes(c.L2SlabBytes))
	}
}

// writeNodes says, for CP groups over several nodes, the nodes each spans and each node's slab. A run whose
// groups each sit on one node says nothing more, as before groups could span nodes.
func (r *Report) writeNodes(w io.Writer) {
	for _, g := range r.Groups {
		if len(g.Nodes) <= 1 {
			continue
		}
		fmt.Fprintf(w, "  nodes: CP group %d spans %d nodes (%s), a slab of %s on each with its %d ranks' parts\n",
			g.Group, len(g.Nodes), strings.Join(g.Nodes, ", "), sizing.FormatBytes(g.SlabBytesPerNode), g.Size/len(g.Nodes))
	}
}

// spansNodes says whether some CP group spans several nodes.
func (r *Report) spansNodes() bool {
	for _, g := range r.Groups {
		if len(g.Nodes) > 1 {
			return true
		}
	}
	return false
}
