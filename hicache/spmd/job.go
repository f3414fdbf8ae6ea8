package spmd

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cphicache/cphicache/internal/errscope"

	"github.com/cphicache/cphicache/mpi"
)

// Job is one rank's MPI session: MPI initialised, the topology checked, a logger that names the
// rank.
type Job struct {
	Topo *Topology
	Log  *slog.Logger

	// Cleanup runs before any abnormal exit (the watchdog, a signal): the cache registers here what
	// must not outlive the process, such as a shared-memory name not yet unlinked.
	Cleanup *Cleanup

	stopSignals func()
	// Fail was called: a SIGTERM from the launcher is expected now
	failing atomic.Bool
	// the latest NewWatchdog's, whose waits a signal's line names
	watchdog atomic.Pointer[Watchdog]
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
	return 0, &errscope.ConfigError{
		Flag:   "log-level",
		Reason: fmt.Sprintf("%q is not one of debug, info, warn, error", s),
	}
}

// StartJob initialises MPI on the calling goroutine (which must stay the one that makes every MPI
// call), has every rank agree on settings (AgreeOnSettings, bounded by SettingsTimeout), and builds
// the topology. On error MPI is finalised again, so the caller only prints and exits.
func StartJob(cp, dp int, level slog.Level, settings []Setting) (*Job, error) {
	if err := mpi.Init(); err != nil {
		var setting *mpi.SettingError
		if errors.As(err, &setting) { // an environment variable every rank reads alike
			return nil, &JobWide{Err: err}
		}
		return nil, err
	}
	world, err := mpi.World()
	if err != nil {
		return nil, errors.Join(err, mpi.Finalize())
	}
	watchdog := NewWatchdog(SettingsTimeout, world.Rank(), nil)
	watchdog.Arm("start-up: the agreement on the job's settings", WorldGroup, world.Size(), 0)
	err = AgreeOnSettings(world, settings)
	watchdog.Stop()
	if err != nil {
		return nil, errors.Join(refuseSettings(world, err), mpi.Finalize())
	}
	topo, err := NewTopology(world, cp, dp)
	if err != nil {
		return nil, errors.Join(err, mpi.Finalize())
	}
	handler := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	logger := slog.New(handler).
		With("rank", topo.WorldRank, "cp_group", topo.CPGroup, "cp_rank", topo.CPRank)
	logger.Info("mpi", "library", libraryName(), "yield_when_idle", mpi.YieldWhenIdle())
	job := &Job{Topo: topo, Log: logger, Cleanup: &Cleanup{}}
	job.stopSignals = handleSignals(
		topo.WorldRank,
		&job.failing,
		job.Cleanup,
		func() string { return job.watchdog.Load().Doing(time.Now()) },
	)
	return job, nil
}

// refuseSettings has every rank print its own side of a settings refusal (a *SettingsError, which
// every rank returns alike) and then meet the others in a barrier, so that no rank exits before all
// have printed: mpirun ends the job at the first non-zero exit, and a rank printing after
// MPI_Finalize had to wait out SilentGrace (2 s to 20 s by the node's load) lest a faster rank's
// exit cut its message off. The error comes back as a *ReportedError, for the caller to exit at
// once. Any other error is returned as it is.
func refuseSettings(world *mpi.Comm, err error) error {
	if !errors.As(err, new(*SettingsError)) {
		return err
	}
	Report(os.Stderr, err, Where{WorldRank: world.Rank()})
	watchdog := NewWatchdog(SettingsTimeout, world.Rank(), nil)
	watchdog.Arm(
		"start-up: every rank's message on the settings that differ",
		WorldGroup,
		world.Size(),
		0,
	)
	barrierErr := world.Barrier()
	watchdog.Stop()
	return errors.Join(&ReportedError{Err: err}, barrierErr)
}

// ReportedError is an error that every rank has already printed, its own side of it, and agreed
// that it had (refuseSettings): the process exits with its status at once, without printing it
// again or waiting.
type ReportedError struct{ Err error }

func (e *ReportedError) Error() string { return e.Err.Error() }
func (e *ReportedError) Unwrap() error { return e.Err }

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

// PrintTopology gathers the rank map and has world rank 0 print it (a World collective: every rank
// calls it).
func (j *Job) PrintTopology(w io.Writer, gpu string) error {
	rows, err := j.Topo.Gather(gpu)
	if err != nil {
		return err
	}
	if j.Topo.WorldRank == 0 {
		WriteTable(w, rows, j.Topo.CPSize, j.Topo.DPSize)
	}
	return nil
}

// Fail prints a fatal error once, from the rank that should (Report), and returns the process exit
// status (ExitStatus), for a process about to exit. A rank that stays silent first waits
// SilentGrace. Whatever is still in the job's clean-up runs first: an error that left a path early
// (a failed broadcast of the segment's name) must not leave its files behind.
func (j *Job) Fail(err error) int {
	j.Cleanup.Run()
	j.failing.Store(true)
	if !Report(os.Stderr, err, j.Where()) {
		time.Sleep(SilentGrace())
	}
	return ExitStatus(err)
}

// Where names this rank for messages.
func (j *Job) Where() Where {
	t := j.Topo
	return Where{WorldRank: t.WorldRank, CPGroup: t.CPGroup, CPRank: t.CPRank, InGroup: true}
}

// NewWatchdog starts a watchdog for this rank whose expiry runs the job's clean-up before it exits.
func (j *Job) NewWatchdog(timeout time.Duration) *Watchdog {
	w := NewWatchdog(timeout, j.Topo.WorldRank, j.Cleanup.Run)
	j.watchdog.Store(w)
	return w
}
