package runner

// Deliberate bugs of the runner, as cache.Bugs are the core's: each a mistake the runner's Env
// could plausibly make, kept so that its harness under simulation (envsim_test.go) shows it catches
// them. They exist only in a build with the simbugs tag (runbugs_on.go); without it every branch
// that tests one is dead code (runbugs_off.go). A run sets them only through runState.testBugs,
// which only the harness and the Testing of a test in this package set (Testing.bugs), so the SPMD
// test binary (built with simbugs) runs without them but in the tests that ask for one.
type runnerBugs uint32

type runnerBug uint32

const (
	// bugUnboundedLoadWait: the load wait (a load-back's copies) polls without the watchdog's drain
	// slot, so a load-back copy that never completes hangs the rank (every poll returns quickly),
	// as a mutation of Wait did.
	bugUnboundedLoadWait runnerBug = 1 << iota
	// bugNoReadDeadline: an L3 read gets no deadline under any prefetch policy, as a mutation of
	// readDeadline did, so a hung read under timeout or best_effort holds the wait that drains it
	// until the watchdog ends the job.
	bugNoReadDeadline
	// bugVerifySkipsLastPage: VerifyLoad leaves a load-back's last page unchecked, as an off-by-one
	// in its loop over the pages would, and counts only the pages it checked. The bytes it skips are
	// right, so no mismatch shows it: only the pages loaded back beside the pages verified can (the
	// report's unverified load-back).
	bugVerifySkipsLastPage
)

func (b runnerBugs) with(bug runnerBug) runnerBugs { return b | runnerBugs(bug) }

// loadWaitName is the core's name for the wait on a step's load-backs (cache's waitLoads).
const loadWaitName = "load wait"
