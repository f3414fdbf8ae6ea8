package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/cphicache/cphicache/hicache/outfile"
)

// LatencyUs is a latency's median and 99th percentile, in microseconds.
type LatencyUs struct {
	P50 float64 `json:"p50"`
	P99 float64 `json:"p99"`
}

// Report is the run's result aggregated over every rank; world rank 0 prints it and writes it as
// JSON.
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
		Checks int64 `json:"checks"`
		// asserts not run: a CP group of one rank has nothing to compare
		Skipped     int64 `json:"skipped"`
		Divergences int64 `json:"divergences"`
	} `json:"placement"`
	Verify struct {
		// PagesLoadedBack: the pages copied back from the L2 into L1, every one of which must be
		// verified (PagesChecked): a run in which the two differ left a load-back unverified, and
		// failed (Unverified).
		PagesLoadedBack int64 `json:"pages_loaded_back"`
		PagesChecked    int64 `json:"pages_checked"`
		Mismatches      int64 `json:"mismatches"`
		// committed objects checked whole, every rank's parts: once a node of its group
		AuditObjects    int64 `json:"audit_objects"`
		AuditMismatches int64 `json:"audit_mismatches"` // of those, objects with a wrong byte
		CopyErrors      int64 `json:"copy_errors"`
	} `json:"verify"`
	// Consensus counts the step consensus, the one all-reduce of a fixed vector that carries
	// everything a CP group agrees on (commit, load-backs, digest, errors), over every group.
	Consensus struct {
		Calls int64 `json:"calls"` // step, flush and final calls
		// calls inside the steps (step and flush) per step: 1 without flushes
		CallsPerStep float64 `json:"calls_per_step"`
		// calls skipped because a CP group has one rank
		Skipped int64 `json:"skipped"`
	} `json:"consensus"`
	Hits struct {
		L1Tokens int64 `json:"l1_tokens"`
		L2Tokens int64 `json:"l2_tokens"`
		// L2 hits on blocks prefetched from the L3 for the request (not in l2_tokens)
		L3Tokens   int64 `json:"l3_tokens"`
		MissTokens int64 `json:"miss_tokens"`
		// IdealTokens: an unbounded cache's hits over the same events (whole pages of a prefix an
		// earlier request of the replica began with since the last flush): the bound L1 + L2 hits
		// approach as the cache grows. An L3 outlives flushes and jobs, so with one L1 + L2 + L3
		// hits can exceed it.
		IdealTokens int64 `json:"ideal_tokens"`
	} `json:"hits"`
	Backup struct {
		Reserved      int64 `json:"reserved"`
		Committed     int64 `json:"committed"`
		ReserveMisses int64 `json:"reserve_misses"`
		L2Evictions   int64 `json:"l2_evictions"`
		// steps that first drained backups pinning over half of L1
		Throttles int64 `json:"throttles"`
	} `json:"backup"`
	L1 struct {
		Evictions     int64 `json:"evictions"`
		LoadBacks     int64 `json:"load_backs"`
		UncachedPages int64 `json:"uncached_pages"`
		// UncachedOversizePages: of those, the pages of requests longer than L1, which could never
		// be cached whole.
		UncachedOversizePages int64 `json:"uncached_oversize_pages"`
	} `json:"l1"`
	Bytes struct {
		D2H int64 `json:"d2h"`
		H2D int64 `json:"h2d"`
	} `json:"bytes"`
	Flushes     int64   `json:"flushes"`
	WallSeconds float64 `json:"wall_seconds"`
	// WritingCheckUs is the latency of the step consensus, which carries writing_check (and
	// everything else agreed in a step).
	WritingCheckUs LatencyUs `json:"writing_check_us"`
	// PlacementAssertUs is the time the slowest rank spent in object-by-object placement
	// comparisons (the digest rides in every consensus at no extra call): an upper bound of what
	// the comparisons cost the run (it includes waiting for skewed ranks, which the next collective
	// would absorb anyway).
	PlacementAssertUs struct {
		Total    float64 `json:"total"`
		SharePct float64 `json:"share_pct"` // of wall_seconds
	} `json:"placement_assert_us"`
	// L3 is the storage tier's, when the run had one (--l3-dir).
	L3 *L3Report `json:"l3,omitempty"`
	// Serving is the serving clock's, when the run had one: time to first token, all of it
	// modelled.
	Serving *ServingReport `json:"serving,omitempty"`
	// OfflineBound is the OFFLINE bound on the run's hits, when its options asked for it (sweep's
	// config.Options.OfflineBound; bound.go).
	OfflineBound *OfflineBound `json:"offline_bound,omitempty"`
	// Trace is the trace's own order (trace.go), when the run replayed a trace.
	Trace  *TraceReport  `json:"trace,omitempty"`
	Groups []GroupReport `json:"groups"`
	// Result is the summary's last line: OK, OK but what was not covered, or FAILED (set by
	// WriteJSON).
	Result string `json:"result"`
	// Failure is what ended a run that failed part-way (the runner's runfailure.go); nil when the
	// replay ran to its end.
	Failure *FailureReport `json:"failure,omitempty"`
	// what produced the report (provenance.go)
	Provenance *Provenance `json:"provenance,omitempty"`
	// GroupViews and RankViews are the end-of-run metrics file's counters by CP group and by rank,
	// as the runner gathered them (empty without --metrics-file).
	GroupViews, RankViews []CounterView `json:"-"`
}

// GroupReport is one CP group: its members' hosts, the nodes it spans with each node's slab, and
// the collectives it ran, with their communicator sizes.
type GroupReport struct {
	Group int      `json:"group"`
	Size  int      `json:"size"`
	Hosts []string `json:"hosts"`
	// Nodes are the nodes the group spans, in the order of their lowest CP rank; each holds one
	// slab with the parts of its share of the group's ranks, SlabBytesPerNode bytes (1/len(Nodes)
	// of a one-node group's).
	Nodes            []string                   `json:"nodes"`
	SlabBytesPerNode int64                      `json:"slab_bytes_per_node"`
	Collectives      map[string]CollectiveStats `json:"collectives"`
	// this replica's prompt tokens served from L3 blocks
	L3HitTokens int64 `json:"l3_hit_tokens"`
	// Latency: CP rank 0's consensus latencies by kind, in the runner's order of kinds, the metrics
	// file's histograms.
	Latency []KindLatency `json:"-"`
}

// KindLatency is the latency histogram of one kind of consensus call, by the kind's name.
type KindLatency struct {
	Kind string
	Hist LatencyHist
}

// CollectiveStats counts one kind of consensus call and the sizes of the communicators it ran on,
// so that a run can prove the scoping rule: every consensus collective ran on a communicator of
// exactly cp ranks.
type CollectiveStats struct {
	Count       int64 // calls entered
	Skipped     int64 // skipped because the CP group has a single rank
	CommSizeMin int   // smallest communicator used (0 when none ran)
	CommSizeMax int
	Seconds     float64 // wall time this rank spent inside them
}

// Capacity is each tier's size in tokens and bytes, as the report states it. Bytes count the
// sizing model's KV (Model: --model's, or --prefill-model's when the geometry replays it scaled
// down; the geometry's own without either).
type Capacity struct {
	Model string `json:"model,omitempty"`
	// TokenBytes: the KV bytes of one token in the CP group (every rank, layer and payload), by
	// which the bytes below are counted; CopiedTokenBytes: what the run copies per token (less when
	// the copies are scaled).
	TokenBytes       int64 `json:"token_bytes"`
	CopiedTokenBytes int64 `json:"copied_token_bytes"`
	Scaled           bool  `json:"copies_scaled"`
	L2Slots          int   `json:"l2_slots"`
	L2Tokens         int64 `json:"l2_tokens"` // per CP group
	L2Bytes          int64 `json:"l2_bytes"`  // per CP group, at TokenBytes
	// per node: its share of each CP group's L2 whose parts it holds, at TokenBytes
	L2BytesPerNode int64 `json:"l2_bytes_per_node"`
	// per CP group, the shared memory actually mapped
	L2SlabBytes  int64 `json:"l2_slab_bytes"`
	DevicePages  int   `json:"device_pages"`  // per rank
	DeviceTokens int64 `json:"device_tokens"` // per rank: the tokens whose part it holds
	DeviceBytes  int64 `json:"device_bytes"`  // per rank (one GPU), at TokenBytes
	// every rank's of a CP group, and of a node, at TokenBytes
	DeviceBytesPerGroup int64 `json:"device_bytes_per_group"`
	DeviceBytesPerNode  int64 `json:"device_bytes_per_node"`
	DeviceBufBytes      int64 `json:"device_buf_bytes"` // per rank, the buffer actually allocated
	// With an L3: --l3-bytes, each CP group's budget at TokenBytes, in tokens, and a node's share
	// of the groups whose parts it holds (a local directory); L3StoreBytes the same blocks' budget
	// as the store holds them (less when the copies are scaled).
	L3Tokens       int64 `json:"l3_tokens,omitempty"`
	L3Bytes        int64 `json:"l3_bytes,omitempty"`
	L3BytesPerNode int64 `json:"l3_bytes_per_node,omitempty"`
	L3StoreBytes   int64 `json:"l3_store_bytes,omitempty"`
	// SizedBy says how L1 and L2 were sized from the model and the GPU when no geometry was given
	// (config.Options.L1FromGPU); empty when the flags gave them.
	SizedBy string `json:"sized_by,omitempty"`
}

// FailureReport is what ended a failed run: the check that failed, the step, the rank that reported
// it (the lowest rank whose failure was its own) and that rank's message, which names the other
// ranks involved.
type FailureReport struct {
	Check     string `json:"check"`
	Step      int64  `json:"step"`
	WorldRank int    `json:"world_rank"`
	CPGroup   int    `json:"cp_group"`
	CPRank    int    `json:"cp_rank"`
	Message   string `json:"message"`
}

// MarshalJSON names CollectiveStats' fields in the report's style.
func (s CollectiveStats) MarshalJSON() ([]byte, error) {
	return json.Marshal(
		map[string]any{
			"count":         s.Count,
			"skipped":       s.Skipped,
			"comm_size":     s.CommSizeMax,
			"comm_size_min": s.CommSizeMin,
		},
	)
}

// Fill sets the report's counts from c, counters summed as the report covers them (a job, a CP
// group or a rank).
func (r *Report) Fill(c *Tallies) {
	r.Placement.Checks, r.Placement.Divergences = c.PlacementChecks, c.Divergences
	// the consensus skips every collective of a one-rank group: no assert compared anything
	if r.CP == 1 {
		r.Placement.Checks, r.Placement.Skipped = 0, c.ConsensusSkipped
	}
	r.Verify.PagesLoadedBack = c.PagesLoadedBack
	r.Verify.PagesChecked, r.Verify.Mismatches = c.PagesChecked, c.Mismatches
	r.Hits.L1Tokens, r.Hits.L2Tokens, r.Hits.MissTokens = c.L1HitTokens, c.L2HitTokens, c.MissTokens
	r.Hits.IdealTokens = c.IdealHitTokens
	r.Hits.L3Tokens = c.L3HitTokens
	r.Backup.Reserved, r.Backup.Committed, r.Backup.ReserveMisses,
		r.Backup.L2Evictions = c.BackupReserved, c.BackupCommitted, c.ReserveMisses, c.L2Evictions
	r.Backup.Throttles = c.WriteThrottles
	r.L1.Evictions, r.L1.LoadBacks, r.L1.UncachedPages, r.L1.UncachedOversizePages = c.L1Evictions,
		c.LoadBacks, c.Uncached, c.UncachedOversize
	r.Bytes.D2H, r.Bytes.H2D = c.BytesD2H, c.BytesH2D
	r.Flushes = c.Flushes
	r.Verify.AuditObjects, r.Verify.AuditMismatches, r.Verify.CopyErrors = c.AuditObjects, c.AuditMismatches, c.CopyErrs
	r.Consensus.Calls, r.Consensus.Skipped = c.ConsensusCalls, c.ConsensusSkipped
	if r.Steps > 0 {
		r.Consensus.CallsPerStep = float64(c.ConsensusStepCalls) / float64(r.Steps)
	}
}

// WriteJSON writes the report to path (--report), whole or not at all.
func (r *Report) WriteJSON(path string) error {
	r.Result = r.Verdict()
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return outfile.Write("report", path, append(b, '\n'))
}

// WriteSummary prints the human summary a new user reads first: the run, then what the cache did
// (summary.go has a helper a line), then what the run checked, then its result.
func (r *Report) WriteSummary(w io.Writer) {
	r.writeRunLine(w)
	r.Trace.writeSummary(w, r.Serving != nil)
	r.writeCapacity(w)
	r.writeNodes(w)
	r.writePromptTokens(w)
	r.writeBackups(w)
	r.L3.writeSummary(w)
	r.Serving.writeSummary(w)
	r.writeCopies(w)
	r.writeConsensus(w)
	fmt.Fprintf(w, "  placement: %s\n", r.placementText())
	r.writeVerify(w)
	fmt.Fprintf(w, "  result: %s\n", r.resultText())
}
