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
	// bugAuditSkipsPart: the commit audit reads one part fewer than its node holds (the last CP
	// rank's), as an off-by-one in its loop over the node's parts would. The parts it reads are
	// right, so it passes and counts the object audited: only a harness that knows what each
	// audited object holds, part by part, can see the part no one read (envsim_audit_test.go).
	bugAuditSkipsPart
	// bugExistenceOwnView: the runner carries the step consensus's L3 existence votes, and the
	// l3_prefetch call's counts, without reducing them, so each rank goes on with its own view of
	// which L3 blocks exist instead of the group's MIN, as a runner that sent only the fixed words
	// of the vector would. The core's decisions then differ between ranks whose views differ.
	bugExistenceOwnView
	runnerBugEnd
)

// runnerBugNames are the deliberate bugs by name, as `-envsim.bug` and the tests name them.
var runnerBugNames = map[runnerBug]string{
	bugUnboundedLoadWait:   "unbounded_load_wait",
	bugNoReadDeadline:      "no_read_deadline",
	bugVerifySkipsLastPage: "verify_skips_last_page",
	bugAuditSkipsPart:      "audit_skips_part",
	bugExistenceOwnView:    "existence_own_view",
}

func (b runnerBug) String() string { return runnerBugNames[b] }

func (b runnerBugs) with(bug runnerBug) runnerBugs { return b | runnerBugs(bug) }

// loadWaitName is the core's name for the wait on a step's load-backs (cache's waitLoads).
const loadWaitName = "load wait"
