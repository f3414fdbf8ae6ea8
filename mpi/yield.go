package mpi

/*
#include "cph_mpi.h"
*/
import "C"

import (
	"fmt"
	"os"
)

// Why collectives may wait by yielding.
//
// A rank waiting in a collective busy-polls inside the MPI library. With at least one core per rank
// that is the fastest way to wait; with more ranks than cores (8 ranks on this project's 2-core
// machines) a polling rank holds a core for a whole scheduler time slice that the rank it waits for
// needs. OpenMPI yields the core between polls when told to (--mca mpi_yield_when_idle 1), but a
// yield hands the core back at once when nothing else is runnable on it, so a waiting rank still
// burns most of a core. MPICH 4's ch4 device, the one Debian packages, has no such setting for a
// single-threaded rank: MPIR_CVAR_POLLS_BEFORE_YIELD belongs to the older ch3 device, and the ch4
// progress loop yields only under MPI_THREAD_MULTIPLE, which measured no faster. A C loop of
// one-element MPI_Allreduce at 8 ranks on 2 cores took 28 ms a call with MPICH 4.0.2 either way,
// and 28 to 37 us (OpenMPI with its yield: 16 to 19 us) started as MPI_Iallreduce and tested 16
// times between yields of the core (np 2, not oversubscribed: 0.5 us blocking, 1.2 us yielding).
//
// So the binding can wait by itself: each blocking collective is started as its non-blocking twin
// and tested, yielding the core between bursts of tests, and after a few yields sleeping, from 1 us
// doubling to 1 ms (cph_mpi.c, cph_wait), so that a rank that waits long gives its core to the
// ranks with work. The whole shared Mooncake trace at 8 ranks on 2 cores (L2 only) took 19.9 s
// waiting OpenMPI's way (mpi_yield_when_idle), 19.2 s yielding only, and 17.6 s yielding then
// sleeping; its ranks' system time fell from 11.3 s to 7.4 s. YieldEnv chooses:
//
//	1     always
//	0     never: the library's own blocking call
//	auto  (or unset) when this node has more ranks than the CPUs they may run on between them
const YieldEnv = "CPHICACHE_MPI_YIELD"

// yieldWhenIdle is the choice Init made, for YieldWhenIdle; yieldChosen that it made one, so that a
// second Init enters no collective.
var yieldWhenIdle, yieldChosen bool

// YieldWhenIdle reports whether collectives wait by testing and yielding the core (see YieldEnv).
func YieldWhenIdle() bool { return yieldWhenIdle }

// yieldingWaits counts the collectives that waited by yielding, for tests.
func yieldingWaits() uint64 { return uint64(C.cph_yielding_wait_count()) }

// setYieldWhenIdle switches the way collectives wait; every rank of a communicator may choose for
// itself.
func setYieldWhenIdle(on bool) {
	yieldWhenIdle = on
	flag := C.int(0)
	if on {
		flag = 1
	}
	C.cph_set_yield_when_idle(flag)
}

// chooseYield applies YieldEnv after MPI_Init. Every rank counts its node's ranks and CPUs whatever
// the setting, because the count is a collective: a rank whose environment differs must not leave
// the others waiting in it.
func chooseYield() error {
	if yieldChosen {
		return nil
	}
	yieldChosen = true
	var ranks, cpus C.int
	if err := check("MPI_Comm_split_type", C.cph_node_cpus(&ranks, &cpus)); err != nil {
		return err
	}
	on, err := decideYield(os.Getenv(YieldEnv), libraryYieldsWhenIdle, int(ranks), int(cpus))
	if err != nil {
		return err
	}
	setYieldWhenIdle(on)
	return nil
}

// decideYield is YieldEnv's rule: setting is the variable's value, libraryYields whether the MPI
// library has a yield setting of its own (no longer deciding: its yield burns the core it hands
// back), nodeRanks and nodeCPUs this node's ranks and the CPUs they may run on.
func decideYield(setting string, libraryYields bool, nodeRanks, nodeCPUs int) (bool, error) {
	switch setting {
	case "1":
		return true, nil
	case "0":
		return false, nil
	case "", "auto":
		return nodeRanks > nodeCPUs, nil
	}
	return false, &SettingError{
		Name:  YieldEnv,
		Value: setting,
		Want:  "1 (yield while waiting), 0 (the library's blocking calls) or auto",
	}
}

// SettingError is an environment variable of this package's with a value it does not take. Every
// rank reads the same environment, so every rank fails alike, before MPI starts.
type SettingError struct {
	Name, Value, Want string
}

func (e *SettingError) Error() string {
	return fmt.Sprintf("mpi: %s=%q: want %s", e.Name, e.Value, e.Want)
}
