package hicache

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cphicache/cphicache/mpi"
)

// Job is one rank's MPI session: MPI initialised, the topology checked, a logger that names the rank.
type Job struct {
	Topo *Topology
	Log  *slog.Logger

	stopSignals func()
	failing     atomic.Bool // Fail was called: a SIGTERM from the launcher is expected now
}

// ParseLogLevel turns --log-level into a slog level.
func ParseLogLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, &ConfigError{"log-level", fmt.Sprintf("%q is not one of debug, info, warn, error", s)}
}

// StartJob initialises MPI on the calling goroutine (which must stay the one that makes every MPI call) and
// builds the topology. On error MPI is finalised again, so the caller only prints and exits.
func StartJob(cp, dp int, level slog.Level) (*Job, error) {
	if err := mpi.Init(); err != nil {
		return nil, err
	}
	world, err := mpi.World()
	if err != nil {
		return nil, errors.Join(err, mpi.Finalize())
	}
	topo, err := NewTopology(world, cp, dp)
	if err != nil {
		return nil, errors.Join(err, mpi.Finalize())
	}
	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	logger := slog.New(handler).With("rank", topo.WorldRank, "cp_group", topo.CPGroup, "cp_rank", topo.CPRank)
	logger.Info("mpi", "library", libraryName(), "yield_when_idle", mpi.YieldWhenIdle())
	job := &Job{Topo: topo, Log: logger}
	job.stopSignals = handleSignals(topo.WorldRank, &job.failing)
	return job, nil
}

// libraryName is the MPI library's name and version, or why it is unknown.
func libraryName() string {
	name, err := mpi.LibraryVersion()
	if err != nil {
		return err.Error()
	}
	return name
}

// Close frees the communicators and finalises MPI.
func (j *Job) Close() error {
	if j.stopSignals != nil {
		j.stopSignals()
	}
	j.Topo.Close()
	return mpi.Finalize()
}

// PrintTopology gathers the rank map and has world rank 0 print it (a World collective: every rank calls it).
func (j *Job) PrintTopology(w io.Writer) error {
	rows, err := j.Topo.Gather()
	if err != nil {
		return err
	}
	if j.Topo.WorldRank == 0 {
		WriteTable(w, rows, j.Topo.CPSize, j.Topo.DPSize)
	}
	return nil
}

// Fail prints a fatal error the way an operator wants to read it: once per job for an error every rank shares,
// once per CP group for a placement divergence, and with the rank otherwise. Ranks that stay silent wait
// briefly, so that the rank that speaks is not killed by mpirun before its message is out. It returns the
// process exit status.
func (j *Job) Fail(err error) int {
	j.failing.Store(true)
	t := j.Topo
	var shared *SharedError
	var div *DivergenceError
	speaker := true
	switch {
	case errors.As(err, &shared):
		speaker = shared.Speaker
	case IsUniform(err):
		speaker = t.WorldRank == 0
	case errors.As(err, &div):
		speaker = t.CPRank == 0
	}
	if speaker {
		if IsUniform(err) {
			fmt.Fprintf(os.Stderr, "cphicache: %v\n", err)
		} else {
			fmt.Fprintf(os.Stderr, "cphicache: rank %d (CP group %d, CP rank %d): %v\n", t.WorldRank, t.CPGroup, t.CPRank, err)
		}
		return 1
	}
	time.Sleep(silentRankGrace)
	return 1
}

// silentRankGrace is how long a rank that does not print a shared error waits before exiting.
const silentRankGrace = 2 * time.Second

// IsUniform reports whether err is one that every rank reaches identically (a bad flag, the verdict of a report
// aggregated over every rank), so printing it once, on world rank 0, says everything.
func IsUniform(err error) bool {
	var ce *ConfigError
	var we *WorkloadError
	var vf *ValidationFailed
	var rf *RunFailed
	var se *mpi.SettingError
	return errors.As(err, &ce) || errors.As(err, &we) || errors.As(err, &vf) || errors.As(err, &rf) || errors.As(err, &se)
}
