package sweep

import (
	"cmp"
	"fmt"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/pool"
)

// A sweep's runs: every point is one run of the cache through hicache's exported API (runner.Run),
// at cp 1 with the group's geometry at its size (pointOptions).

// Run runs the workload once per size, design and policy on a one-rank job, calling done after
// each point (progress), with the size's OFFLINE bound after its last policy's point when the
// sweep compares policies; with the serving clock, a point of no L2 first, and the answer at the
// end. Each point's geometry is that of `run` at cp group.GPUs on one node (Options.Size): its L1
// is every rank's --device-bytes (a page of a rank holds 1/cp of the page's KV, so cp ranks hold cp
// times the pages of one), its L2 --l2-bytes' slots (a per-rank point's 1/cp of them). The cache
// then runs at cp 1 with those pages and slots, which decide the same (placement does not depend
// on the CP size).
func Run(
	job *spmd.Job,
	options *config.Options,
	sizes []Size,
	group Group,
	done func(Point, *BoundPoint),
) (*Result, error) {
	if err := CheckJob(job); err != nil {
		return nil, err
	}
	group.GPUs = max(1, group.GPUs)
	if !group.Designs.Shared && !group.Designs.PerRank {
		group.Designs.Shared = true
	}
	longest, err := runner.CheckL1HoldsLongestRequest(options, group.GPUs)
	if err != nil {
		return nil, err
	}
	s := &sweeper{job: job, options: options, group: group, done: done, res: &Result{
		Model:                options.SizingModel(),
		Trace:                options.TracePath,
		WritePolicy:          options.Policy.String(),
		PageTokens:           options.PageTokens,
		GroupGPUs:            group.GPUs,
		LongestRequestTokens: longest,
	}}
	if err := s.res.setL1(options, group); err != nil {
		return nil, err
	}
	if done == nil {
		s.done = func(Point, *BoundPoint) {}
	}
	s.policies, s.compare = group.Policies, len(group.Policies) > 0
	if !s.compare {
		s.policies = []pool.Policy{options.L2Policy}
	}
	for _, policy := range group.Policies {
		s.res.Policies = append(s.res.Policies, PolicyCurve{Policy: policy.String()})
	}
	if options.Serving != nil {
		p, _, err := s.point(Size{Slots: 1}, DesignNoL2, s.policies[0], false)
		if err != nil {
			return nil, err
		}
		s.res.NoL2 = &p
		s.done(p, nil)
	}
	for _, size := range sizes {
		if err := s.size(size); err != nil {
			return nil, err
		}
	}
	s.res.Answer = s.res.answer(group.MarginPct)
	if a := s.res.Answer; a != nil && (s.compare || group.PolicyGiven) {
		a.Policy = s.policies[0].String()
	}
	s.res.recommend(group.MarginPct)
	return s.res, nil
}

// sweeper is one sweep's runs and what they add up to.
type sweeper struct {
	job      *spmd.Job
	options  *config.Options
	group    Group
	done     func(Point, *BoundPoint)
	res      *Result
	policies []pool.Policy // the group's, or the options' one
	compare  bool          // the group named its policies: each point is labelled, each size bound
}

// size runs one size: each policy on the shared pool (the first computing the size's OFFLINE bound
// when the sweep compares policies), then the per-rank copies under the first policy, every point
// held under the bound.
func (s *sweeper) size(size Size) error {
	var bound *BoundPoint
	if s.group.Designs.Shared {
		for i, policy := range s.policies {
			p, b, err := s.point(size, DesignShared, policy, s.compare && i == 0)
			if err != nil {
				return err
			}
			bound = cmp.Or(b, bound)
			if err := underBound(p, bound); err != nil {
				return err
			}
			if i == 0 {
				s.res.Points = append(s.res.Points, p)
			}
			if s.compare {
				s.res.Policies[i].Points = append(s.res.Policies[i].Points, p)
			}
			if i == len(s.policies)-1 && bound != nil {
				s.res.OfflineBound = append(s.res.OfflineBound, *bound)
				s.done(p, bound)
			} else {
				s.done(p, nil)
			}
		}
	}
	if s.group.Designs.PerRank {
		p, _, err := s.point(size, DesignPerRank, s.policies[0], false)
		if err != nil {
			return err
		}
		if err := underBound(p, bound); err != nil { // 1/cp of the slots: the shared bound holds
			return err
		}
		s.res.PerRank = append(s.res.PerRank, p)
		s.done(p, nil)
	}
	return nil
}

// point runs one point of a design and policy at a size, with the OFFLINE bound at its capacity
// when bound is set.
func (s *sweeper) point(size Size, design string, policy pool.Policy, bound bool) (
	Point, *BoundPoint, error,
) {
	opts := *s.options
	opts.L2Policy, opts.OfflineBound = policy, bound
	p, r, err := s.res.runPoint(s.job, &opts, size, s.group, design)
	if err != nil {
		return Point{}, nil, err
	}
	if s.compare {
		p.Policy = policy.String()
	}
	return p, boundPoint(p, r.OfflineBound), nil
}

// runPoint runs one point of a design at a size and reads it, with its report.
func (res *Result) runPoint(
	job *spmd.Job,
	options *config.Options,
	size Size,
	group Group,
	design string,
) (Point, *report.Report, error) {
	opts, capacity, err := pointOptions(options, size, group, design)
	if err != nil {
		return Point{}, nil, err
	}
	r, err := runner.Run(job, opts)
	if err != nil {
		return Point{}, nil, err
	}
	if err := r.RunFailure(); err != nil {
		return Point{}, nil, err
	}
	r.Capacity = capacity
	if r.Serving != nil {
		res.Prefill = r.Serving.Model
	}
	p := sweepPoint(r)
	p.Design = design
	p.L1Pages, p.L1CapacityTokens = capacity.DevicePages, capacity.DeviceTokens
	p.L1HoldsLongestRequest = runner.L1HoldsPages(p.L1Pages, opts.PageTokens, res.LongestRequestTokens)
	return p, r, nil
}

// setL1 states, in res, the L1 of the group the sweep models, as its shared points run it
// (GroupL1), and the per-rank copies' (a GPU's whole copies: 1/cp of its pages).
func (res *Result) setL1(options *config.Options, group Group) error {
	c, err := GroupL1(options, group)
	if err != nil {
		return err
	}
	res.TokenBytes, res.CopiedTokenBytes, res.DevicePages, res.DeviceTokens = c.TokenBytes,
		c.CopiedTokenBytes, c.DevicePages, c.DeviceTokens
	res.DeviceBytes, res.DeviceBytesPerGroup, res.SizedBy = c.DeviceBytes, c.DeviceBytesPerGroup,
		c.SizedBy
	if group.Designs.PerRank {
		res.PerRankDevicePages = perRankPages(c.DevicePages, group.GPUs)
		res.PerRankDeviceTokens = int64(res.PerRankDevicePages) * int64(options.PageTokens)
	}
	return nil
}

// GroupL1 is the L1 of the CP group a sweep models, as its shared points run it (Options.Size at
// cp group.GPUs on one node): each GPU's pages and bytes, the group's bytes, and SizedBy, the rule
// that sized it from the model and the GPU when no L1 size was given (MODELLED), as run's capacity
// states it.
func GroupL1(options *config.Options, group Group) (report.Capacity, error) {
	group.GPUs = max(1, group.GPUs)
	_, c, err := pointOptions(options, Size{Slots: 1}, group, DesignShared)
	return c, err
}

// SlotsOf is the L2 slots of each size in a shared point of the group (pointOptions).
func SlotsOf(options *config.Options, sizes []Size, group Group) ([]int, error) {
	group.GPUs = max(1, group.GPUs)
	slots := make([]int, len(sizes))
	for i, size := range sizes {
		_, c, err := pointOptions(options, size, group, DesignShared)
		if err != nil {
			return nil, err
		}
		slots[i] = c.L2Slots
	}
	return slots, nil
}

// perRankPages is a per-rank copies' L1 or L2 of the shared design's pages (or slots) over a group
// of gpus: each GPU (or rank) holds whole copies, so the same bytes hold 1/gpus of the tokens.
func perRankPages(pages, gpus int) int { return max(1, pages/max(1, gpus)) }

// pointOptions are the options of one point's run at cp 1, its copies drained every step and its
// serving clock virtual, with the L1 pages and L2 slots of the group at the size (Options.Size at
// cp group.GPUs on one node), and the group's capacity, which the point reports. A per-rank point
// models the design the shared pool replaces, where every rank keeps whole copies of the KV it
// caches, on its GPU and on the host (docs/SIZING.md, "What sharing buys"): it has 1/cp of the L1
// pages (a GPU's bytes of whole tokens) and 1/cp of the slots (a rank's pool of 1/cp of the
// node's bytes), and its loads move a hit's whole KV over each GPU's link; its capacity keeps the
// bytes.
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
		sized.L2Slots = perRankPages(sized.L2Slots, group.GPUs)
		sized.DevicePages = perRankPages(sized.DevicePages, group.GPUs)
		capacity.L2Slots, capacity.DevicePages = sized.L2Slots, sized.DevicePages
		capacity.L2Tokens = int64(sized.L2Slots) * int64(sized.PageTokens)
		capacity.DeviceTokens = int64(sized.DevicePages) * int64(sized.PageTokens)
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
