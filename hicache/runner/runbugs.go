package runner

// Deliberate bugs of the runner, as cache.Bugs are the core's: each a mistake the runner's Env
// could plausibly make, kept so that its harness under simulation (envsim_test.go) shows it catches
// them. They exist only in a build with the simbugs tag (runbugs_on.go); without it every branch
// that tests one is dead code (runbugs_off.go). A run sets them only through runState.testBugs,
// which only the harness sets, so the SPMD test binary (built with simbugs) runs without them.
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
)

func (b runnerBugs) with(bug runnerBug) runnerBugs { return b | runnerBugs(bug) }

// loadWaitName is the core's name for the wait on a step's load-backs (cache's waitLoads).
const loadWaitName = "load wait"
