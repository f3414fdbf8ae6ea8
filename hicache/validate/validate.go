package validate

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/mpi"
)

// Validation runs the workload five times in one job and turns what it sees into checks an operator
// can read before trusting a cache design: the main pass (placement, flush, scoping, data), a pass
// with a tiny L2 (capacity misses), a pass with a perturbed rank in every CP group (divergence
// detection), and two passes over an L3 of their own (l3.go).

// divergenceInjectStep places the injected perturbation of the divergence pass: the digest rides in
// every consensus, so it must be caught by the very next one (see divergenceWantStep).
const divergenceInjectStep = 5

// Run runs the validation matrix on every rank; world rank 0 gets the report. progress, when not
// nil, is told as each pass starts (the caller prints it on one rank).
func Run(
	job *spmd.Job,
	options *config.Options,
	progress Progress,
) (*report.ValidationReport, error) {
	return runTesting(job, options, progress, nil)
}

// Progress is told as each pass of Passes starts, with what it replays.
type Progress func(pass, passes int, what string)

// matrix is the passes whose results the checks read.
type matrix struct {
	main, capacity, divergence, l3Fill, l3Read *pass
}

// runTesting is Run with a test's levers on every pass (nil: none).
func runTesting(job *spmd.Job, options *config.Options, progress Progress,
	tst *runner.Testing) (*report.ValidationReport, error) {
	say := func(pass int, what string) {
		if progress != nil {
			progress(pass, Passes, what)
		}
	}
	t := job.Topo
	sized, err := options.Size(t.CPSize, t.NodeSize, t.GroupNodes)
	if err != nil {
		return nil, err
	}
	// The L3 passes' directory is made first, so that a --l3-dir it cannot be made in fails the job
	// at once, not after three passes (which would have used that L3 meanwhile). A pass that fails
	// leaves its removal to the failing exit's clean-up.
	l3Dir, forgetL3Dir, err := validationL3Dir(job, sized.L3.Dir)
	if err != nil {
		return nil, err
	}
	m, err := runPasses(job, sized, tst, say)
	if err != nil {
		return nil, err
	}
	plain := *sized
	// The L3 row's own passes take the L3.
	plain.L3 = config.L3Options{Dir: sized.L3.Dir, Namespace: sized.L3.Namespace}
	m.l3Fill, m.l3Read, err = l3Passes(
		job,
		&plain,
		runner.Pass{RecordFlushWrong: true},
		tst,
		l3Dir,
		say,
	)
	removeValidationL3Dir(job, l3Dir, forgetL3Dir)
	if err != nil {
		return nil, err
	}
	return m.report(job)
}

// runPasses runs the passes over the L2 alone: as configured, with a tiny L2, and with a perturbed
// rank. Every pass counts its flushes for the flush_reset row, and goes on past a wrong one.
func runPasses(job *spmd.Job, opts *config.Options, tst *runner.Testing,
	say func(pass int, what string)) (m *matrix, err error) {
	t, m := job.Topo, &matrix{}
	mode := runner.Pass{RecordFlushWrong: true}
	main := mode
	main.FlushAtEnd = true
	say(1, "as configured")
	if m.main, err = runPass(job, opts, main, tst); err != nil {
		return nil, err
	}
	capacity := *opts
	capacity.L2Slots = max(16, opts.L2Slots/32) // far below the working set: misses and evictions
	say(2, fmt.Sprintf("an L2 of %d slots, far below the working set", capacity.L2Slots))
	if m.capacity, err = runPass(job, &capacity, mode, tst); err != nil {
		return nil, err
	}
	divergence, perturbed := *opts, mode
	perturbed.RecordDivergence = true
	// The last CP rank of every group perturbs its allocator.
	divergence.InjectDivergence = config.Injection{
		Rank: t.CPGroup*t.CPSize + t.CPSize - 1,
		Step: divergenceInjectStep,
		Set:  t.CPSize > 1,
	}
	say(3, "one perturbed rank per CP group")
	if m.divergence, err = runPass(job, &divergence, perturbed, tst); err != nil {
		return nil, err
	}
	return m, nil
}

// report is the matrix's checks, one row each, and the main pass's groups.
func (m *matrix) report(job *spmd.Job) (*report.ValidationReport, error) {
	t := job.Topo
	v := &report.ValidationReport{Ranks: t.World.Size(), CP: t.CPSize, DP: t.DPSize}
	rows := []func() (report.Check, error){
		m.main.checkPlacement,
		m.divergence.checkDivergenceDetected,
		func() (report.Check, error) { return checkFlushReset(m.main, m.capacity, m.divergence) },
		func() (report.Check, error) { return checkScoping(m.main, m.capacity, m.divergence) },
		m.capacity.checkCapacity,
		func() (report.Check, error) { return checkData(m.main, m.capacity, m.divergence) },
		func() (report.Check, error) { return checkL3(m.l3Fill, m.l3Read) },
	}
	for _, row := range rows {
		c, err := row()
		if err != nil {
			return nil, err
		}
		v.Checks = append(v.Checks, c)
	}
	var err error
	if v.Groups, err = m.main.Groups(); err != nil {
		return nil, err
	}
	return v, nil
}

// Passes is the number of passes Run replays the workload in.
const Passes = 5

// pass is one pass's result on this rank, with the job it ran in and its options.
type pass struct {
	job  *spmd.Job
	opts *config.Options
	*runner.PassResult
}

// runPass runs one pass of the matrix.
func runPass(
	job *spmd.Job,
	opts *config.Options,
	mode runner.Pass,
	tst *runner.Testing,
) (*pass, error) {
	r, err := runner.RunPass(job, opts, mode, tst)
	if err != nil {
		return nil, err
	}
	return &pass{job: job, opts: opts, PassResult: r}, nil
}

// sumOverGroups adds a group-uniform value over the CP groups (CP-rank 0 of each contributes) and a
// per-rank value over every rank, in one World all-reduce.
func (rs *pass) sumOverGroups(groupValues, rankValues []int64) ([]int64, error) {
	all := make([]int64, 0, len(groupValues)+len(rankValues))
	for _, v := range groupValues {
		if rs.job.Topo.CPRank != 0 {
			v = 0
		}
		all = append(all, v)
	}
	all = append(all, rankValues...)
	err := rs.job.Topo.World.AllreduceInt64(all, all, mpi.Sum)
	return all, err
}

func (rs *pass) steps64() (int64, error) {
	s, err := rs.sumOverGroups([]int64{rs.Steps}, nil)
	if err != nil {
		return 0, err
	}
	return s[0], nil
}
