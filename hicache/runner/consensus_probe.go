package runner

import (
	"fmt"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/mpi"
)

// StepProbe runs the step consensus alone, outside a run, for `cphicache bench step`: the very call
// a run makes once per step (consensus.agree of kind cache.StepConsensus, through the MPI transport
// a CPU run uses, under an armed watchdog), with a vote whose agreement every rank can predict, so
// that each call's result is checked.
//
// What it leaves out is the controller's side of a step (runtime.Gosched, advancing the copy
// queues, the allocator's digest, commit and release): local work that no choice of collective
// changes.
type StepProbe struct {
	cons       *consensus
	probe      *cache.Probe
	watchdog   *spmd.Watchdog
	rank, size uint64
}

// probeEnv is the probe's Env: the consensus's collective, nothing else (a probe makes no other
// call).
type probeEnv struct {
	cache.Env
	cons *consensus
}

func (e probeEnv) Collective(c *cache.Collective) error { return e.cons.collective(c) }

// NewStepProbe makes a probe on the communicator cp (every rank of it must make the same calls),
// with a watchdog of the given timeout as a run has (0: none; `cphicache run` defaults to 120 s).
// Close stops the watchdog.
func NewStepProbe(cp *mpi.Comm, watchdogTimeout time.Duration) *StepProbe {
	w := spmd.NewWatchdog(watchdogTimeout, cp.Rank(), nil)
	cons := newConsensus(cp, 0, nil, w)
	return &StepProbe{
		cons:     cons,
		probe:    cache.NewProbe(cp.Rank(), cp.Size(), 0, probeEnv{cons: cons}),
		watchdog: w,
		rank:     uint64(cp.Rank()),
		size:     uint64(cp.Size()),
	}
}

// Close stops the watchdog's goroutine.
func (p *StepProbe) Close() { p.watchdog.Stop() }

// Stats counts the step consensus calls made so far and the communicator sizes they ran on.
func (p *StepProbe) Stats() report.CollectiveStats { return p.cons.stats[cache.StepConsensus] }

// Step makes one step consensus with a vote derived from frontier and this rank, and checks the
// agreement. It returns a *ProbeMismatchError when the agreement is not the one the votes imply (a
// wrong result), or the consensus's own error (a failed transport, ranks out of step).
func (p *StepProbe) Step(frontier uint64) error {
	a, err := p.probe.Step(p.vote(frontier))
	if err != nil {
		return err
	}
	return p.check(frontier, a)
}

// vote spreads the MIN over the ranks: the write frontier's MIN is rank 0's, the load frontier's
// the last rank's, and only the last rank has a backup in flight, so a transport that returned one
// rank's own vector, or skipped a rank, shows in some word. The digest is the same on every rank,
// as in a healthy run.
func (p *StepProbe) vote(frontier uint64) cache.ProbeVote {
	last := p.size - 1
	return cache.ProbeVote{
		WriteFrontier: frontier + p.rank,
		WriteIdle:     p.rank != last,
		LoadFrontier:  frontier + last - p.rank,
		LoadDone:      true,
		Digest:        probeDigest(frontier),
	}
}

// check compares the agreement with what the votes imply. At one rank the consensus is skipped and
// the agreement is this rank's own vote, which the same values describe.
func (p *StepProbe) check(frontier uint64, a cache.ProbeAgreement) error {
	digest := probeDigest(frontier)
	for _, f := range [...]struct {
		name      string
		got, want uint64
	}{
		{"write frontier", a.WriteFrontier, frontier},
		{"write idle", boolWord(a.WriteIdle), 0},
		{"load frontier", a.LoadFrontier, frontier},
		{"load done", boolWord(a.LoadDone), 1},
		{"digest min", a.DigestMin, digest},
		{"digest max", a.DigestMax, digest},
	} {
		if f.got != f.want {
			return &ProbeMismatchError{Frontier: frontier, Field: f.name, Got: f.got, Want: f.want}
		}
	}
	return nil
}

// probeDigest stands in for the allocator's digest: a mix of the frontier, so that it changes every
// step.
func probeDigest(frontier uint64) uint64 {
	z := frontier + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	return z ^ z>>31
}

// ProbeMismatchError is a step consensus whose agreement differs from the one the votes imply.
type ProbeMismatchError struct {
	Frontier  uint64
	Field     string
	Got, Want uint64
}

func (e *ProbeMismatchError) Error() string {
	return fmt.Sprintf(
		"step consensus probe at frontier %d: agreed %s %d, the votes imply %d",
		e.Frontier,
		e.Field,
		e.Got,
		e.Want,
	)
}

func boolWord(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
