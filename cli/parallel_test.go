package cli

import (
	"fmt"
	"hash/fnv"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/cphicache/cphicache/hicache/shm"
)

// Tests side by side. Most of a failing job's time here is Open MPI's mpirun sleeping: once a rank
// exits non-zero it waits odls_base_sigkill_timeout (1 s) before each of its SIGTERM and SIGKILL to
// the ranks, even ranks that exited too (`mpirun -np 2 false`: 2.1 s; with the timeout 0, 0.08 s,
// but then no rank has time to clean up). So the tests made of such jobs run beside each other
// (besideOthers), each under a job id of its own, so that its segment check sees its own jobs'
// segments only, and TestMain checks that no job of the suite left one.

// ownJobIDs holds the top-level tests that run beside others, by name.
var ownJobIDs sync.Map

// besideOthers lets t run in parallel with the other tests that call it, under a job id of its own
// (jobIDOf): call it first, in a test that starts its jobs with mpirunCommand or the helpers over
// it, or runOnNodes (a job started another way would carry the suite's id, which this test's
// segment check no longer looks at), and that bounds no job's time tightly: four jobs share the two
// cores. (The copy-error and stuck-copy tests, which bound their jobs' end to a few seconds, stay
// out.)
func besideOthers(t *testing.T) {
	ownJobIDs.Store(t.Name(), true)
	t.Parallel()
}

// jobIDOf is the CPHICACHE_JOB_ID of t's jobs: the suite's, or its top-level test's own when that
// runs beside others: the suite's id, '_', the hash of the test's name. (A segment name keeps 40
// characters of its job id, and the names of two tests may share more than the 24 left after the
// suite's id.)
func jobIDOf(t *testing.T) string {
	top, _, _ := strings.Cut(t.Name(), "/")
	if _, ok := ownJobIDs.Load(top); !ok {
		return testJobID
	}
	h := fnv.New32a()
	h.Write([]byte(top))
	return fmt.Sprintf("%s_%08x", testJobID, h.Sum32())
}

// suiteSegments lists the segments of every job of this suite left in /dev/shm, under its id or a
// test's own.
func suiteSegments() ([]string, error) {
	entries, err := os.ReadDir(shm.Dir)
	if err != nil {
		return nil, err
	}
	var left []string
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "cphicache-"+testJobID)
		if ok && (strings.HasPrefix(rest, "-") || strings.HasPrefix(rest, "_")) {
			left = append(left, e.Name())
		}
	}
	return left, nil
}

// checkSuiteLeftNoSegments is TestMain's last check: it prints what is left and says whether the
// suite passes.
func checkSuiteLeftNoSegments() bool {
	left, err := suiteSegments()
	if err != nil || len(left) > 0 {
		fmt.Fprintf(
			os.Stderr,
			"FAIL: the suite's jobs left shared memory behind: %v %v\n",
			left,
			err,
		)
		return false
	}
	return true
}
