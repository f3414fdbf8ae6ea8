package spmd

import (
	"testing"

	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/mpi/mpitest"
)

// The spmd tests are SPMD: the Makefile runs this binary under mpirun at 1, 2, 8 and 16 ranks, and
// plain `go test` runs it as one rank. Every test must enter the same collectives in the same order
// on every rank.

var testWorld *mpi.Comm

func TestMain(m *testing.M) { mpitest.Main(m, &testWorld) }
