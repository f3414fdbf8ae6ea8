//go:build !mpiself

package bench

/*
#include "ref_step.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// stepCall is one all-reduce of a step: the words it reduces, with MPI_MAX instead of MPI_MIN when
// max is set.
type stepCall struct {
	words int
	max   bool
}

// stepPlanMaxWords is ref_step_max_words: the most words one step may reduce, all calls together.
const stepPlanMaxWords = C.ref_step_max_words

// refStepLoop runs a C loop of steps made of plan's calls on MPI_COMM_WORLD (ref_step.c): warmup
// untimed steps, then iters timed ones, back to back (gapSeconds 0) or each alone after a spin of
// gapSeconds. It returns this rank's mean seconds per step and the words the C side found wrong.
func refStepLoop(plan []stepCall, iters, warmup int, gapSeconds float64) (float64, int64, error) {
	var counts, isMax [stepPlanMaxWords]C.int
	if len(plan) > len(counts) {
		return 0, 0, fmt.Errorf("bench: a step of %d calls, at most %d", len(plan), len(counts))
	}
	for j, c := range plan {
		counts[j] = C.int(c.words)
		if c.max {
			isMax[j] = 1
		}
	}
	var seconds C.double
	var wrong C.int64_t
	// The arrays are Go memory passed for the call only; C keeps no pointer to them.
	rc := C.ref_step_loop(
		refComm(),
		(*C.int)(unsafe.Pointer(&counts[0])),
		(*C.int)(unsafe.Pointer(&isMax[0])),
		C.int(len(plan)),
		C.int(iters),
		C.int(warmup),
		C.double(gapSeconds),
		&seconds,
		&wrong,
	)
	if rc != C.MPI_SUCCESS {
		return 0, 0, fmt.Errorf("bench: C step loop failed with MPI error code %d", int(rc))
	}
	return float64(seconds), int64(wrong), nil
}
