//go:build mpich && !mpiself

package mpi

// #cgo pkg-config: mpich
import "C"

// MPICH 4's ch4 device has no setting that yields the core while a single-threaded rank waits
// (yield.go).
const libraryYieldsWhenIdle = false
