//go:build !mpich && !mpiself

package bench

// The C reference is compiled with the MPI installation's own pkg-config flags, as mpi/ is: the
// flags mpicc would pass.

// #cgo pkg-config: ompi-c
import "C"
