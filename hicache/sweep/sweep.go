// Package sweep is `cphicache sweep`: the hit rate against the L2's capacity, one run of the same
// workload per size, in one process. Placement does not depend on the CP size (every rank of a
// group takes the same decisions, and a model's slot is a page of its tokens whatever cp is:
// hicache/sizing/models.go), so the sweep runs the cache at cp 1, as an MPI singleton, with the
// pages and slots that the CP group it models (--group-gpus) has at each size. Every point
// drains its copies every step (SyncCopies): a backup commits in the step that made it, so a
// point's hit counts are a function of the configuration, equal to `run --sync-copies` at that
// size.
//
// It drives the cache through hicache's exported API only (Run, Options, Report); hicache must not
// import it.
package sweep

import (
	"encoding/json"
	"fmt"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/spmd"
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
	// Points are the shared pool's, in the order of the sizes; PerRank the per-rank copies' at the
	// same sizes (--l2-design); NoL2 the baseline of no L2, with the serving clock.
	Points  []Point `json:"points"`
	PerRank []Point `json:"per_rank,omitempty"`
	NoL2    *Point  `json:"no_l2,omitempty"`
	// Answer is the L2 to buy and what it buys, with the serving clock (answer.go).
	Answer *Answer `json:"answer,omitempty"`
}

// Group is the CP group a sweep models and what it shows of it: its GPUs (--group-gpus), each
// holding --device-bytes of L1 as a rank of `run` at that CP size does, on a node of its own
// (--l2-bytes is that node's); which L2 designs its points run (--l2-design); and the margin of the
// best TTFT p50 within which it recommends the smallest L2 (--recommend-margin, in percent).
type Group struct {
	GPUs      int
	Designs   Designs
	MarginPct float64
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

// Run runs the workload once per size and design on a one-rank job, calling done after each point
// (progress); with the serving clock, a point of no L2 first, and the answer at the end. Each
// point's geometry is that of `run` at cp group.GPUs on one node (Options.Size): its L1 is every
// rank's --device-bytes (a page of a rank holds 1/cp of the page's KV, so cp ranks hold cp times
// the pages of one), its L2 --l2-bytes' slots (a per-rank point's 1/cp of them). The cache then
// runs at cp 1 with those pages and slots, which decide the same (placement does not depend on the
// CP size).
func Run(
	job *spmd.Job,
	options *config.Options,
	sizes []Size,
	group Group,
	done func(Point),
) (*Result, error) {
	if err := CheckJob(job); err != nil {
		return nil, err
	}
	group.GPUs = max(1, group.GPUs)
	if !group.Designs.Shared && !group.Designs.PerRank {
		group.Designs.Shared = true
	}
	if err := runner.CheckL1HoldsLongestRequest(options, group.GPUs); err != nil {
		return nil, err
	}
	res := &Result{
		Model:       options.SizingModel(),
		Trace:       options.TracePath,
		WritePolicy: options.Policy.String(),
		PageTokens:  options.PageTokens,
		GroupGPUs:   group.GPUs,
	}
	run := func(size Size, design string) (Point, error) {
		p, err := res.runPoint(job, options, size, group, design)
		if err == nil && done != nil {
			done(p)
		}
		return p, err
	}
	if options.Serving != nil {
		p, err := run(Size{Slots: 1}, DesignNoL2)
		if err != nil {
			return nil, err
		}
		res.NoL2 = &p
	}
	for _, size := range sizes {
		for _, design := range group.Designs.names() {
			p, err := run(size, design)
			if err != nil {
				return nil, err
			}
			if design == DesignPerRank {
				res.PerRank = append(res.PerRank, p)
			} else {
				res.Points = append(res.Points, p)
			}
		}
	}
	res.Answer = res.answer(group.MarginPct)
	return res, nil
}

// DefaultL1Multiples are the L2 sizes a sweep given none runs, in multiples of the group's L1:
// around SGLang's --hicache-ratio default of 2 (config.HiCacheRatio), from half of L1 (an L2 that
// mostly repeats it) to 8 times it.
var DefaultL1Multiples = []float64{0.5, 1, 2, 4, 8}

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

// names are the designs to run at each size, the shared pool first.
func (d Designs) names() []string {
	var names []string
	if d.Shared {
		names = append(names, DesignShared)
	}
	if d.PerRank {
		names = append(names, DesignPerRank)
	}
	return names
}

// runPoint runs one point of a design at a size and reads it.
func (res *Result) runPoint(
	job *spmd.Job,
	options *config.Options,
	size Size,
	group Group,
	design string,
) (Point, error) {
	opts, capacity, err := pointOptions(options, size, group, design)
	if err != nil {
		return Point{}, err
	}
	r, err := runner.Run(job, opts)
	if err != nil {
		return Point{}, err
	}
	if r.Failed() {
		return Point{}, &report.RunFailed{
			Divergences:     r.Placement.Divergences,
			Mismatches:      r.Verify.Mismatches,
			AuditMismatches: r.Verify.AuditMismatches,
			CopyErrors:      r.Verify.CopyErrors,
			PagesLoadedBack: r.Verify.PagesLoadedBack,
			PagesChecked:    r.Verify.PagesChecked,
		}
	}
	r.Capacity = capacity
	res.TokenBytes, res.CopiedTokenBytes, res.DevicePages, res.DeviceTokens = capacity.TokenBytes,
		capacity.CopiedTokenBytes, capacity.DevicePages, capacity.DeviceTokens
	res.DeviceBytes, res.DeviceBytesPerGroup = capacity.DeviceBytes, capacity.DeviceBytesPerGroup
	if r.Serving != nil {
		res.Prefill = r.Serving.Model
	}
	p := sweepPoint(r)
	p.Design = design
	return p, nil
}

// pointOptions are the options of one point's run at cp 1, its copies drained every step and its
// serving clock virtual, with the L1 pages and L2 slots of the group at the size (Options.Size at
// cp group.GPUs on one node), and the group's capacity, which the point reports. A per-rank point
// has 1/cp of the slots (a rank's pool of 1/cp of the node's bytes, holding whole copies) and its
// loads move a hit's whole KV over each GPU's link; its capacity keeps the node's bytes.
func pointOptions(
	options *config.Options,
	size Size,
	group Group,
	design string,
) (*config.Options, report.Capacity, error) {
	opts := *options
	opts.SyncCopies, opts.Quiet = true, true
	if options.Serving != nil {
		virtual := *options.Serving
		virtual.Virtual, virtual.PerRankCopies = true, design == DesignPerRank
		opts.Serving = &virtual
	}
	opts.L2Slots, opts.L2Bytes = size.Slots, size.Bytes
	sized, err := opts.Size(group.GPUs, group.GPUs, 1)
	if err != nil {
		return nil, report.Capacity{}, err
	}
	capacity := sized.Capacity(group.GPUs, group.GPUs)
	if design == DesignPerRank {
		sized.L2Slots = max(1, sized.L2Slots/group.GPUs)
		capacity.L2Slots = sized.L2Slots
		capacity.L2Tokens = int64(sized.L2Slots) * int64(sized.PageTokens)
	}
	opts.L2Slots, opts.L2Bytes = sized.L2Slots, 0
	opts.DevicePages, opts.DeviceBytes = sized.DevicePages, 0
	opts.L1FromGPU, opts.L2FromL1 = false, false // sized once, for the group
	return &opts, capacity, nil
}

// CheckJob refuses a job of more than one rank: the sweep is one process (an MPI singleton).
func CheckJob(job *spmd.Job) error {
	if n := job.Topo.World.Size(); n != 1 {
		return &spmd.JobWide{
			Err: fmt.Errorf(
				"sweep runs as one process, the cache at cp 1 (placement does not depend on the CP size): start it without mpirun, not as %d ranks",
				n,
			),
		}
	}
	return nil
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
