package hicache

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// The guarded start-up of the copy engine and writing_check's transport. Both can fail on one rank only (out of
// device memory, a host registration the driver refuses, a GPU layout NCCL would refuse) or hang there (a
// wedged driver, a peer that never reaches NCCL's init). So the phase runs under the watchdog, and its outcome
// is agreed over the world: every rank exits with the failing rank's message, and none is left waiting in the
// next collective, which under srun without --kill-on-bad-exit would wait for good.

// The watchdog's names for the start-up phases, as its message shows them.
const (
	siteEngineStart = "start-up: copy engine (GPU context, device memory, host registration)"
	siteNCCLStart   = "start-up: NCCL communicator init"
)

// ParseRankInjection reads RANK, a world rank (--inject-setup-error); flag names the flag for errors.
func ParseRankInjection(flag, s string) (Injection, error) {
	if s == "" {
		return Injection{}, nil
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return Injection{}, &spmd.ConfigError{Flag: flag, Reason: fmt.Sprintf("%q is not RANK (a world rank >= 0)", s)}
	}
	return Injection{Rank: r, Set: true}, nil
}

// ncclInitTimeout bounds NCCL's communicator init: three quarters of the watchdog's timeout, so that an init that
// cannot complete ends in an agreed error naming NCCL, its communicator aborted, before the watchdog (armed over
// the same phase) ends the process. No watchdog (0) means no bound.
func ncclInitTimeout(watchdogTimeout time.Duration) time.Duration {
	return watchdogTimeout * 3 / 4
}

// startDevices makes the copy engine (rs.eng) and returns writing_check's transport, under the watchdog, with
// every rank's outcome agreed after each: the engine's here, NCCL's inside newNCCLCommOnCP.
func (rs *runState) startDevices(cfg CacheConfig, watchdog *spmd.Watchdog) (MinAllReducer, error) {
	t := rs.job.Topo
	defer watchdog.Disarm()
	watchdog.Arm(siteEngineStart, t.CPGroup, t.CPSize, 0)
	eng, err := newCopyEngine(t, cfg, rs.slab.Slabs)
	if err != nil {
		eng = nil // a failed constructor may return a typed nil in the interface
	} else if inj := rs.opts.InjectSetupError; inj.Set && inj.Rank == t.WorldRank {
		err = errors.Join(fmt.Errorf("copy engine: injected set-up failure on world rank %d (--inject-setup-error)", t.WorldRank), eng.Close())
		eng = nil
	}
	if err := spmd.AgreeOnFailure(t.World, err); err != nil {
		if eng != nil {
			eng.Close()
		}
		return nil, err
	}
	rs.eng = eng
	watchdog.Arm(siteNCCLStart, t.CPGroup, t.CPSize, 0)
	return newFrontierReducer(t, rs.opts.Collective, ncclInitTimeout(rs.opts.WatchdogTimeout))
}
