//go:build mpiself

package bench

// The mpiself build (mpi/cgo_self.go: one process, no MPI library) has no C reference to compare
// with: its loops call MPI directly. The benchmarks that need it say so; the GPU check's
// one-process binary, which is this build, never runs them.

import "errors"

var errNoMPIReference = errors.New(
	"bench: the C MPI reference needs an MPI build, not the mpiself one",
)

// stepCall is one all-reduce of a step: its words and whether it is a MAX (the MPI build's
// refstep.go).
type stepCall struct {
	words int
	max   bool
}

// stepPlanMaxWords bounds the words of one step, as ref_step.h does.
const stepPlanMaxWords = 16

func configureRef() error { return errNoMPIReference }

func refAllreduceLoop([]uint64, int, int, float64) (float64, error) { return 0, errNoMPIReference }

func refAllreduceOnce([]uint64) error { return errNoMPIReference }

func floorAllreduce([]uint64) error { return errNoMPIReference }

func refStepLoop([]stepCall, int, int, float64) (float64, int64, error) {
	return 0, 0, errNoMPIReference
}
