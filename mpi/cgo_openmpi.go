//go:build !mpich && !mpiself

package mpi

// The cgo flags come from the MPI installation's own pkg-config file, never from hard-coded paths.

// #cgo pkg-config: ompi-c
import "C"

// OpenMPI yields the core while waiting when told to (--mca mpi_yield_when_idle 1), which the
// Makefile does.
const libraryYieldsWhenIdle = true
