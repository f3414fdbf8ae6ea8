package validate

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/hicache/runner/runnertest"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/mpi/mpitest"
)

// The validate tests are SPMD, as the runner's: the Makefile runs this binary under mpirun at 1, 2,
// 8 and 16 ranks, and plain `go test` runs it as one rank. Every test must enter the same
// collectives in the same order on every rank. Their fixtures are runnertest's.

var testWorld *mpi.Comm

func TestMain(m *testing.M) { mpitest.Main(m, &testWorld) }

func testLayout() (cp, dp int) { return runnertest.Layout(testWorld) }

func testJob(t *testing.T) *spmd.Job {
	t.Helper()
	return runnertest.Job(t, testWorld)
}

func smallOptions() *config.Options {
	_, dp := testLayout()
	return runnertest.SmallOptions(dp)
}

// checked is every test's levers on its passes: the core's step invariants and its eviction model
// checked.
func checked() *runner.Testing { return &runner.Testing{Core: runnertest.CheckedCore} }

func checkNoLeakedSegments(t *testing.T) {
	t.Helper()
	runnertest.CheckNoLeakedSegments(t)
}

func sharedTempDir(t *testing.T) string {
	t.Helper()
	return runnertest.SharedTempDir(t, testWorld)
}

// validateTesting is a validate with no progress told, and a test's levers.
func validateTesting(
	job *spmd.Job,
	opts *config.Options,
	tst *runner.Testing,
) (*report.ValidationReport, error) {
	return runTesting(job, opts, nil, tst)
}
