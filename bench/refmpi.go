//go:build !mpiself

package bench

/*
#cgo noescape ref_allreduce_floor
#cgo nocallback ref_allreduce_floor
#include "ref_allreduce.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/cphicache/cphicache/mpi"
)

// refComm is the communicator the C reference runs on: MPI_COMM_WORLD, the same communicator the Go
// side is handed (mpi/ keeps its handles private, so the C side names the world itself).
func refComm() C.MPI_Fint { return C.ref_world_f() }

// configureRef makes the C reference and the cgo floor wait and reduce as mpi/ does on this library
// (ref_configure), so that the three sides differ by the binding alone.
func configureRef() error {
	yield := C.int(0)
	if mpi.YieldWhenIdle() {
		yield = 1
	}
	if rc := C.ref_configure(yield); rc != C.MPI_SUCCESS {
		return fmt.Errorf(
			"bench: C reference MPI_Reduce_local failed with MPI error code %d",
			int(rc),
		)
	}
	return nil
}

// refAllreduceLoop is the C loop (ref_allreduce.c): warmup untimed calls, then iters calls timed
// with MPI_Wtime inside C, back to back (gapSeconds 0) or each alone after a spin of gapSeconds. It
// returns this rank's mean seconds per call.
func refAllreduceLoop(buf []uint64, iters, warmup int, gapSeconds float64) (float64, error) {
	var seconds C.double
	rc := C.ref_allreduce_loop(
		refComm(),
		(*C.uint64_t)(unsafe.Pointer(&buf[0])),
		C.int(len(buf)),
		C.int(iters),
		C.int(warmup),
		C.double(gapSeconds),
		&seconds,
	)
	if rc != C.MPI_SUCCESS {
		return 0, fmt.Errorf(
			"bench: C reference MPI_Allreduce failed with MPI error code %d",
			int(rc),
		)
	}
	return float64(seconds), nil
}

// refAllreduceOnce is one untimed C call on buf, for validation.
func refAllreduceOnce(buf []uint64) error {
	if rc := C.ref_allreduce_once(
		refComm(), (*C.uint64_t)(unsafe.Pointer(&buf[0])), C.int(len(buf)),
	); rc != C.MPI_SUCCESS {
		return fmt.Errorf("bench: C reference MPI_Allreduce failed with MPI error code %d", int(rc))
	}
	return nil
}

// floorAllreduce is one all-reduce as a Go program with no MPI binding at all would make it: one
// cgo crossing straight into MPI_Allreduce on MPI_COMM_WORLD (no handle conversion, no argument
// checks). The address travels as an integer, as mpi/ passes it, so neither side pays cgo's pointer
// check; go:uintptrescapes keeps the buffer on the heap and alive, as there. mpi.AfterForeignCall
// lets mpi/'s scheduler pass cover these calls, without which sysmon would take the P on every tick
// of a long loop (mpi/schedpass.go).
func floorAllreduce(buf []uint64) error {
	rc := floorAllreduceAt(uintptr(unsafe.Pointer(&buf[0])), len(buf))
	mpi.AfterForeignCall()
	if rc != C.MPI_SUCCESS {
		return fmt.Errorf("bench: cgo-floor MPI_Allreduce failed with MPI error code %d", int(rc))
	}
	return nil
}

//go:uintptrescapes
//go:noinline
func floorAllreduceAt(buf uintptr, count int) C.int {
	return C.ref_allreduce_floor(C.uintptr_t(buf), C.int(count))
}
