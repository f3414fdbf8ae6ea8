// Package sweep is `cphicache sweep`: the hit rate against the L2's capacity, one run of the same
// workload per size, in one process. Placement does not depend on the CP size (every rank of a
// group takes the same decisions, and a model's slot is a page of its tokens whatever cp is:
// hicache/sizing/models.go), so the sweep runs the cache at cp 1, as an MPI singleton, with the
// pages and slots that the CP group it models (--group-gpus) has at each size. Every point
// drains its copies every step (SyncCopies): a backup commits in the step that made it, so a
// point's hit counts are a function of the configuration, equal to `run --sync-copies` at that
// size.
//
// With --l2-policy given it compares the L2's policies (policies.go): each size runs once per
// policy on the shared pool, beside the OFFLINE bound at that size (hicache/bound, computed once per
// size by the first policy's run), and no policy's point may pass the bound.
//
// It drives the cache through hicache's exported API only (Run, Options, Report: run.go); hicache
// must not import it.
package sweep

import (
	"encoding/json"
	"fmt"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/pool"
)

// Size is one point's L2 capacity: Slots, or Bytes per node (as --l2-bytes) when Bytes > 0.
type Size struct {
	Slots int
	Bytes int64
}

// Point is one run of the sweep.
type Point struct {
	L2Slots  int     `json:"l2_slots"`
	L2Tokens int64   `json:"l2_tokens"`
	L2Bytes  int64   `json:"l2_bytes"` // the group's, at the sizing model's bytes per token
	L2GiB    float64 `json:"l2_gib"`
	// the group's node's (the sweep's group has a node of its own: the same as L2Bytes)
	L2BytesPerNode int64 `json:"l2_bytes_per_node"`
	// Hits: the run's prompt tokens served from L1 and L2, computed, and an unbounded cache's hits.
	L1Tokens    int64   `json:"l1_tokens"`
	L2HitTokens int64   `json:"l2_hit_tokens"`
	MissTokens  int64   `json:"miss_tokens"`
	IdealTokens int64   `json:"ideal_tokens"`
	HitRate     float64 `json:"hit_rate"`   // (L1 + L2 hits) / prompt tokens
	IdealRate   float64 `json:"ideal_rate"` // ideal hits / prompt tokens
	Committed   int64   `json:"backups_committed"`
	L2Evictions int64   `json:"l2_evictions"`
	WallSeconds float64 `json:"wall_seconds"`
	// UncachedPages: prompt pages computed but not cached, L1 being too small for their request;
	// UncachedPct of every prompt page. A point with many has a hit rate that L2 cannot raise.
	UncachedPages int64 `json:"uncached_pages"`
	// UncachedOversizePages: of those, the pages of requests longer than L1 (a sweep refuses such
	// an L1).
	UncachedOversizePages int64   `json:"uncached_oversize_pages"`
	UncachedPct           float64 `json:"uncached_pct"`
	// Serving is the point's time to first token and prompt tokens/s, MODELLED on a virtual clock
	// over the point's own hits (with --gpu or --prefill-profile): the sizing answer in TTFT, not
	// only in hit rate.
	Serving *ServingPoint `json:"serving,omitempty"`
	// Design is the point's L2: the shared pool, per-rank copies, or none (DesignNoL2).
	Design string `json:"design"`
	// L1Pages (L1CapacityTokens in tokens) is the pages of tokens the point's L1 holds: the
	// group's (each GPU a part of each page) in the shared design and with no L2, a GPU's whole
	// copies in the per-rank (1/cp of them); L1HoldsLongestRequest whether they hold the
	// workload's longest request (a per-rank point's may not: its pages past L1 are computed and
	// never cached).
	L1Pages               int   `json:"l1_pages"`
	L1CapacityTokens      int64 `json:"l1_capacity_tokens"`
	L1HoldsLongestRequest bool  `json:"l1_holds_longest_request"`
	// Policy is the point's L2 policy (--l2-policy), when the sweep compared policies.
	Policy string `json:"policy,omitempty"`
}

// ServingPoint is a point's modelled serving figures, in seconds of the workload's clock.
type ServingPoint struct {
	TTFTP50               float64 `json:"ttft_p50_s"`
	TTFTP90               float64 `json:"ttft_p90_s"`
	TTFTP99               float64 `json:"ttft_p99_s"`
	PromptTokensPerSecond float64 `json:"prompt_tokens_per_s"`
	// WithL3 is the same with an unbounded L3 under the L2, read at --l3-read-rate (MODELLED,
	// SERVING.md).
	WithL3 *report.ModelledL3Serving `json:"with_l3,omitempty"`
	// Load is the trace's demand beside what the group serves at the point's hits, and the
	// replicas --ttft-target takes (MODELLED, SERVING.md).
	Load *report.ServingLoad `json:"load,omitempty"`
}

// Result is the sweep's JSON: the configuration every point shares, and the points in the order
// given.
type Result struct {
	// Provenance is what produced the sweep (the command sets it): the build, the command line,
	// every flag.
	Provenance *report.Provenance `json:"provenance,omitempty"`
	// the model whose KV the bytes count (--model, or --prefill-model over a scaled-down
	// geometry); empty: the geometry's own bytes
	Model string `json:"model,omitempty"`
	// the prefill model the points' serving figures are modelled by
	Prefill     string `json:"prefill,omitempty"`
	Trace       string `json:"trace,omitempty"` // empty: the synthetic workload
	WritePolicy string `json:"write_policy"`
	PageTokens  int    `json:"page_tokens"`
	// KV bytes per token, which the byte sizes count
	TokenBytes int64 `json:"token_bytes"`
	// what the runs copied per token
	CopiedTokenBytes int64 `json:"copied_token_bytes"`
	// the CP group the points model (--group-gpus): DevicePages and DeviceTokens are each of its
	// ranks'
	GroupGPUs    int   `json:"group_gpus"`
	DevicePages  int   `json:"device_pages"`
	DeviceTokens int64 `json:"device_tokens"`
	// L1's bytes a GPU and over the group, at TokenBytes
	DeviceBytes         int64 `json:"device_bytes"`
	DeviceBytesPerGroup int64 `json:"device_bytes_per_group"`
	// SizedBy is the rule that sized L1 from the model and the GPU, MODELLED, when no L1 size was
	// given (config.Options.L1FromGPU; run's capacity says the same); empty when the flags gave it.
	// L2SizedBy is the rule of the L2 sizes when none were given (the command sets it:
	// DefaultSizesRule).
	SizedBy   string `json:"sized_by,omitempty"`
	L2SizedBy string `json:"l2_sized_by,omitempty"`
	// PerRankDevicePages and PerRankDeviceTokens are a GPU's L1 in the per-rank copies' points
	// (--l2-design): DevicePages' bytes holding whole copies, 1/cp of the tokens.
	PerRankDevicePages  int   `json:"per_rank_device_pages,omitempty"`
	PerRankDeviceTokens int64 `json:"per_rank_device_tokens,omitempty"`
	// LongestRequestTokens is the workload's longest request, which the shared L1 must hold (the
	// sweep refuses one that does not) and a per-rank point's may not (Point.L1HoldsLongestRequest).
	LongestRequestTokens int `json:"longest_request_tokens"`
	// Points are the shared pool's, in the order of the sizes; PerRank the per-rank copies' at the
	// same sizes (--l2-design); NoL2 the baseline of no L2, with the serving clock. When the sweep
	// compared policies, all three run the first policy given.
	Points  []Point `json:"points"`
	PerRank []Point `json:"per_rank,omitempty"`
	NoL2    *Point  `json:"no_l2,omitempty"`
	// Policies are, when the sweep compared L2 policies (--l2-policy given), each policy's curve on
	// the shared pool, in the order given (the first's points are Points), with its recommended
	// size; OfflineBound the OFFLINE bound at each size, in the order of the sizes (policies.go).
	Policies     []PolicyCurve `json:"policies,omitempty"`
	OfflineBound []BoundPoint  `json:"offline_bound,omitempty"`
	// Answer is the L2 to buy and what it buys, with the serving clock (answer.go).
	Answer *Answer `json:"answer,omitempty"`
}

// Group is the CP group a sweep models and what it shows of it: its GPUs (--group-gpus), each
// holding --device-bytes of L1 as a rank of `run` at that CP size does, on a node of its own
// (--l2-bytes is that node's); which L2 designs its points run (--l2-design); and the margin of the
// best TTFT p50 within which it recommends the smallest L2 (--recommend-margin, in percent); and the
// L2 policies it compares (--l2-policy given): each runs at every size on the shared pool, the first
// also the per-rank copies and the point of no L2, and each size has the OFFLINE bound beside them.
// No Policies: the options' policy alone, without the bound (a sweep without --l2-policy, as
// before there were policies). PolicyGiven: --l2-policy was given, and the answer names the policy
// its curve ran (Answer.Policy).
type Group struct {
	GPUs        int
	Designs     Designs
	MarginPct   float64
	Policies    []pool.Policy
	PolicyGiven bool
}

// Designs are the L2 designs a sweep runs at each size: the CP-shared pool, and the per-rank
// copies it replaces (docs/SIZING.md, "What sharing buys").
type Designs struct{ Shared, PerRank bool }

// The designs a point runs.
const (
	DesignShared  = "shared"
	DesignPerRank = "per-rank"
	// DesignNoL2 is the baseline point, an L2 of one slot: L1 alone.
	DesignNoL2 = "no-l2"
)

// DefaultL1Multiples are the L2 sizes a sweep given none runs, in multiples of the group's L1:
// around SGLang's --hicache-ratio default of 2 (config.HiCacheRatio), from half of L1 (an L2 that
// mostly repeats it) to 8 times it.
var DefaultL1Multiples = []float64{0.5, 1, 2, 4, 8}

// DefaultSizesRule says how a sweep given no L2 size sizes its L2s (DefaultSizes).
func DefaultSizesRule() string {
	return fmt.Sprintf("L2 sizes of %v times the group's L1 (SGLang's --hicache-ratio default is 2)",
		DefaultL1Multiples)
}

// DefaultSizes are the sizes of a sweep given none (with a model that sizes its L1 and the serving
// clock): DefaultL1Multiples of the group's L1, in its slots.
func DefaultSizes(options *config.Options, group Group) ([]Size, error) {
	sized, err := options.Size(max(1, group.GPUs), max(1, group.GPUs), 1)
	if err != nil {
		return nil, err
	}
	var sizes []Size
	for _, m := range DefaultL1Multiples {
		sizes = append(sizes, Size{Slots: max(1, int(m*float64(sized.DevicePages)))})
	}
	return sizes, nil
}

func sweepPoint(r *report.Report) Point {
	h, c := r.Hits, r.Capacity
	tokens := float64(max(1, h.L1Tokens+h.L2Tokens+h.MissTokens))
	uncached, uncachedPct := r.Uncached()
	var serving *ServingPoint
	if s := r.Serving; s != nil {
		serving = &ServingPoint{
			TTFTP50:               s.IdealTTFT.P50,
			TTFTP90:               s.IdealTTFT.P90,
			TTFTP99:               s.IdealTTFT.P99,
			PromptTokensPerSecond: s.IdealPromptTokensPerSecond,
			WithL3:                s.ModelledL3,
			Load:                  s.Load,
		}
	}
	return Point{Serving: serving,
		UncachedPages: uncached, UncachedPct: uncachedPct, UncachedOversizePages: r.L1.UncachedOversizePages,
		L2Slots: c.L2Slots, L2Tokens: c.L2Tokens, L2Bytes: c.L2Bytes, L2GiB: float64(c.L2Bytes) / (1 << 30),
		L2BytesPerNode: c.L2BytesPerNode,
		L1Tokens:       h.L1Tokens, L2HitTokens: h.L2Tokens, MissTokens: h.MissTokens, IdealTokens: h.IdealTokens,
		HitRate: float64(
			h.L1Tokens+h.L2Tokens,
		) / tokens, IdealRate: float64(h.IdealTokens) / tokens,
		Committed: r.Backup.Committed, L2Evictions: r.Backup.L2Evictions, WallSeconds: r.WallSeconds,
	}
}

// WriteJSON writes the sweep to path.
func (s *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return outfile.Write("json", path, append(b, '\n'))
}
