package transport

import (
	"errors"
	"fmt"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
)

// The guarded start-up of the copy engine and the consensus's transport. Both can fail on one rank
// only (out of device memory, a host registration the driver refuses, a GPU layout NCCL would
// refuse) or hang there (a wedged driver, a peer that never reaches NCCL's init). So the phase runs
// under the watchdog, and its outcome is agreed over the world: every rank exits with the failing
// rank's message, and none is left waiting in the next collective, which under srun without
// --kill-on-bad-exit would wait for good.

// The watchdog's names for the start-up phases, as its message shows them.
const (
	SiteEngineStart = "start-up: copy engine (GPU context, device memory, host registration)"
	SiteNCCLStart   = "start-up: NCCL communicator init"
)

// Config is what a rank's devices are made from.
type Config struct {
	Collective  string   // --collective: mpi or nccl
	Words       int      // the longest vector the consensus's transport carries
	DeviceBytes int64    // this rank's device KV buffer
	Slabs       [][]byte // the CP group's shared L2, as this rank maps it
	// --watchdog-timeout; NCCL's init is bounded inside it (NCCLInitTimeout)
	WatchdogTimeout time.Duration
	FailSetup       bool // --inject-setup-error names this rank: its engine's set-up fails
}

// NCCLInitTimeout bounds NCCL's communicator init: three quarters of the watchdog's timeout, so
// that an init that cannot complete ends in an agreed error naming NCCL, its communicator aborted,
// before the watchdog (armed over the same phase) ends the process. No watchdog (0) means no bound.
func NCCLInitTimeout(watchdogTimeout time.Duration) time.Duration {
	return watchdogTimeout * 3 / 4
}

// Start makes the copy engine and returns it with the consensus's transport (nil for MPI), under
// the watchdog, with every rank's outcome agreed after each: the engine's here, NCCL's inside
// newNCCLCommOnCP. Every rank of the job calls it.
func Start(
	t *spmd.Topology,
	cfg Config,
	watchdog *spmd.Watchdog,
) (kernels.Engine, MinAllReducer, error) {
	defer watchdog.Disarm()
	watchdog.Arm(SiteEngineStart, t.CPGroup, t.CPSize, 0)
	eng, err := newCopyEngine(t, cfg.DeviceBytes, cfg.Slabs)
	if err != nil {
		eng = nil // a failed constructor may return a typed nil in the interface
	} else if cfg.FailSetup {
		err = errors.Join(fmt.Errorf("copy engine: injected set-up failure on world rank %d (--inject-setup-error)", t.WorldRank), eng.Close())
		eng = nil
	}
	if err := spmd.AgreeOnFailure(t.World, err); err != nil {
		if eng != nil {
			eng.Close()
		}
		return nil, nil, err
	}
	watchdog.Arm(SiteNCCLStart, t.CPGroup, t.CPSize, 0)
	reducer, err := NewReducer(t, cfg.Collective, cfg.Words, NCCLInitTimeout(cfg.WatchdogTimeout))
	if err != nil {
		return nil, nil, errors.Join(err, eng.Close())
	}
	return eng, reducer, nil
}
