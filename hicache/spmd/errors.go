package spmd

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"time"

	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/mpi"
)

// Which ranks reach an error alike decides which rank prints it: an operator wants each cause once,
// from the rank that knows it, and mpirun ends the job at the first non-zero exit, so the silent
// ranks wait a moment.

// The scopes and the errors that carry them are package errscope's (types only, so that the cache
// core need not link MPI); they are re-exported here for the job's code.
type (
	Scope   = errscope.Scope
	Scoped  = errscope.Scoped
	JobWide = errscope.JobWide
)

const (
	RankScope  = errscope.RankScope
	GroupScope = errscope.GroupScope
	JobScope   = errscope.JobScope
)

// ScopeOf returns err's scope.
func ScopeOf(err error) Scope { return errscope.Of(err) }

// The exit statuses of cphicache, each with one meaning, so that a script (or Slurm's exit code)
// tells a bad command line from a failed check, a hung job and a signal. ExitWatchdog (3) is in
// watchdog.go, the injected exit (4) in hicache/runner/faults.go, and a signal's 128 + its number
// in signals.go.
const (
	// a check failed (a divergence, a wrong byte, a failed copy) or a run-time error
	ExitFailure = 1
	// the command line or a CPHICACHE_* setting is wrong: a usage error or an invalid --flag
	ExitUsage = 2
	// ExitNotCovered: with --strict, a run that found nothing wrong but did not check everything
	// ("OK, but ...").
	ExitNotCovered = 5
)

// ExitStatus is the exit status of a job that ends with err: ExitUsage for a flag's value or a
// CPHICACHE_NODE_NAME setting at fault (errscope.ConfigError, NodeNameError) or ranks given
// different settings (SettingsError), ExitFailure otherwise.
func ExitStatus(err error) int {
	if errors.As(err, new(*errscope.ConfigError)) || errors.As(err, new(*NodeNameError)) ||
		errors.As(err, new(*SettingsError)) {
		return ExitUsage
	}
	if errors.As(err, new(*errscope.NotCoveredError)) {
		return ExitNotCovered
	}
	return ExitFailure
}

// SharedError is a failure every rank returns after agreeing on it: one rank, chosen by
// AgreeOnFailure, reports the cause (Speaker); the others end quietly, so that a job prints its
// reason once.
type SharedError struct {
	Err     error
	Speaker bool
}

func (e *SharedError) Error() string { return e.Err.Error() }
func (e *SharedError) Unwrap() error { return e.Err }

// PeerFailedError is what a rank returns when another rank's failure ended the run; that rank
// reports the cause.
type PeerFailedError struct{}

func (PeerFailedError) Error() string { return "another rank failed; its message names the cause" }

// Echo is implemented by an error that only relays another rank's failure (that rank prints the
// cause).
type Echo interface{ EchoesPeer() bool }

// originates reports whether err is a rank's own failure rather than the echo of another rank's.
func originates(err error) bool {
	var e Echo
	return !errors.As(err, new(PeerFailedError)) && !(errors.As(err, &e) && e.EchoesPeer())
}

// AgreeOnFailure makes a local failure everyone's, in one World all-reduce that every rank enters:
// if any rank failed, every rank returns a *SharedError. The rank that reports it is the lowest one
// whose failure is its own (not the echo of a peer's), or else the lowest failing rank.
func AgreeOnFailure(world *mpi.Comm, local error) error {
	lowest := []int64{math.MaxInt64, math.MaxInt64} // lowest originating rank, lowest failing rank
	if local != nil {
		lowest[1] = int64(world.Rank())
		if originates(local) {
			lowest[0] = lowest[1]
		}
	}
	if err := world.AllreduceInt64(lowest, lowest, mpi.Min); err != nil {
		return errors.Join(local, err)
	}
	speaker := lowest[0]
	if speaker == math.MaxInt64 {
		speaker = lowest[1]
	}
	switch {
	case lowest[1] == math.MaxInt64:
		return nil
	case local == nil:
		return &SharedError{Err: PeerFailedError{}}
	default:
		return &SharedError{Err: local, Speaker: speaker == int64(world.Rank())}
	}
}

// Where names a rank for messages: its world rank, and its CP group and CP rank once the topology
// is known.
type Where struct {
	WorldRank       int
	CPGroup, CPRank int
	InGroup         bool // the topology is known
}

// SilentRankGrace is how long, on a node with a core to spare, a rank that does not print a fatal
// error waits before exiting, so that the rank that speaks is not killed by mpirun before its
// message is out.
const SilentRankGrace = 2 * time.Second

// silentGraceMax bounds SilentGrace on a loaded node.
const silentGraceMax = 20 * time.Second

// SilentGrace is SilentRankGrace stretched by this node's load average per CPU, up to
// silentGraceMax: the speaker waits for a core as long as the run queue is deep (at a load average
// of 45 on 2 cores, 2 s did not see its message out). The longer wait costs nothing when the
// speaker is quick: a launcher ends the other ranks once one exits non-zero (mpirun a second
// later).
func SilentGrace() time.Duration { return silentGrace(loadPerCPU()) }

func silentGrace(loadPerCPU float64) time.Duration {
	return min(time.Duration(float64(SilentRankGrace)*max(1, loadPerCPU)), silentGraceMax)
}

// loadPerCPU is the one-minute load average over the CPUs this process may run on, or 1 where it
// cannot be read.
func loadPerCPU() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 1
	}
	var load float64
	if _, err := fmt.Sscan(string(b), &load); err != nil {
		return 1
	}
	return load / float64(runtime.NumCPU())
}

// Report prints a fatal error the way an operator wants to read it, once: an agreed failure by the
// rank chosen to speak, a job-wide error by world rank 0, a group-wide one by the group's CP rank
// 0, anything else by its own rank, named. It reports whether this rank printed; a rank that did
// not should wait SilentGrace.
func Report(w io.Writer, err error, at Where) bool {
	scope := ScopeOf(err)
	var shared *SharedError
	speaker := true
	switch {
	case errors.As(err, &shared):
		speaker = shared.Speaker
	case scope == JobScope:
		speaker = at.WorldRank == 0
	case scope == GroupScope:
		speaker = !at.InGroup || at.CPRank == 0
	}
	if !speaker {
		return false
	}
	switch {
	case scope == JobScope:
		fmt.Fprintf(w, "cphicache: %v\n", err)
	case at.InGroup:
		fmt.Fprintf(
			w,
			"cphicache: rank %d (CP group %d, CP rank %d): %v\n",
			at.WorldRank,
			at.CPGroup,
			at.CPRank,
			err,
		)
	default:
		fmt.Fprintf(w, "cphicache: rank %d: %v\n", at.WorldRank, err)
	}
	return true
}
