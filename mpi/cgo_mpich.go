//go:build mpich

package mpi

// #cgo pkg-config: mpich
import "C"
