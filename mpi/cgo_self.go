//go:build mpiself

package mpi

// The mpiself build links no MPI library: every communicator is this one process (rank 0 of 1), and
// the collectives copy their send buffer to their receive buffer, which is what MPI does on one
// rank. It exists for the GPU check (kernels/gpu-check.sh): a lent GPU machine may have no MPI
// installation, and its test binaries must still run the production start-up (topology,
// shared-memory slab, guarded engine and NCCL set-up) at one rank. It is never the build that runs
// a job: `cphicache version` names it.

// #cgo CFLAGS: -DCPH_MPI_SELF
import "C"

// One process never waits for another, so there is nothing to yield for.
const libraryYieldsWhenIdle = true
