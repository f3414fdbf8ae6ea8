package runner

import (
	"fmt"
	"os"
	"testing"

	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/mpi/mpitest"
)

// The hicache tests are SPMD: the Makefile runs this binary under mpirun at 1, 2, 8 and 16 ranks, and plain
// `go test` runs it as one rank. Every test must enter the same collectives in the same order on every rank.

var testWorld *mpi.Comm

func TestMain(m *testing.M) { mpitest.Main(m, &testWorld) }

// testJobID names the segments these tests create: CPHICACHE_JOB_ID where the Makefile gives each mpirun its own,
// else this process's id. The leak checks look only at this job's segments, so that other cphicache jobs on the
// same machine (another engineer's suite) neither fail them nor hide behind them.
var testJobID = func() string {
	if id := os.Getenv("CPHICACHE_JOB_ID"); id != "" {
		return id
	}
	return fmt.Sprintf("test_p%d", os.Getpid())
}()
