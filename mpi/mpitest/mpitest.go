// Package mpitest runs a package's tests as an SPMD program: the Makefile launches the test binary
// under mpirun at several rank counts, and plain `go test` runs it as one rank. It is for _test.go
// files only.
package mpitest

import (
	"fmt"
	"os"
	"testing"

	"github.com/cphicache/cphicache/mpi"
)

// Main initialises MPI, gives the tests the world communicator through world, runs them, and exits
// with a code every rank agrees on (a test that failed on one rank fails the binary on all), after
// finalising MPI. Call it from TestMain.
func Main(m *testing.M, world **mpi.Comm) {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	w, err := mpi.World()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	*world = w
	code := m.Run()
	failed := []int64{int64(code)}
	if err := w.AllreduceInt64(failed, failed, mpi.Max); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	} else if failed[0] != 0 && code == 0 {
		code = 1
	}
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	}
	os.Exit(code)
}
