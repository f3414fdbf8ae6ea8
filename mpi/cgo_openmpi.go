//go:build !mpich

package mpi

// The cgo flags come from the MPI installation's own pkg-config file, never from hard-coded paths.

// #cgo pkg-config: ompi-c
import "C"
