package spmd

import (
	"fmt"
	"os"
	"testing"

	"github.com/cphicache/cphicache/mpi"
)

// The spmd tests are SPMD: the Makefile runs this binary under mpirun at 1, 2, 8 and 16 ranks, and plain
// `go test` runs it as one rank. Every test must enter the same collectives in the same order on every rank.

var testWorld *mpi.Comm

func TestMain(m *testing.M) {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var err error
	if testWorld, err = mpi.World(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	failed := []int64{int64(code)}
	if err := testWorld.AllreduceInt64(failed, failed, mpi.Max); err != nil || (failed[0] != 0 && code == 0) {
		code = 1
	}
	if err := mpi.Finalize(); err != nil {
		code = 2
	}
	os.Exit(code)
}
