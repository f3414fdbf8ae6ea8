package runner

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/pool"
)

// Tests of the step consensus (SPMD: every rank runs them, at 1, 2, 8 and 16 ranks under make
// test-mpi).

// testConsensus is the runner's consensus on the CP communicator with the core's vector code
// (cache.Probe): the very calls a run makes.
type testCall struct {
	cons  *consensus
	probe *cache.Probe
}

func (c testCall) agree(k cache.ConsensusKind, v cache.ProbeVote) (cache.ProbeAgreement, error) {
	return c.probe.Call(k, v)
}

func testConsensus(t *testing.T) (testCall, *spmd.Topology) {
	t.Helper()
	job := testJob(t)
	w := spmd.NewWatchdog(0, job.Topo.WorldRank, nil)
	t.Cleanup(w.Stop)
	cons := newConsensus(job.Topo.CP, job.Topo.CPGroup, nil, w)
	return testCall{
		cons: cons,
		probe: cache.NewProbe(
			job.Topo.CPRank,
			job.Topo.CPSize,
			job.Topo.CPGroup,
			probeEnv{cons: cons},
		),
	}, job.Topo
}

func TestConsensusAgreesOnMinimaAndDigestRange(t *testing.T) {
	c, topo := testConsensus(t)
	r := uint64(topo.CPRank)
	a, err := c.agree(
		cache.StepConsensus,
		cache.ProbeVote{
			WriteFrontier: 100 + r,
			WriteIdle:     r != 1,
			LoadFrontier:  7,
			LoadDone:      true,
			Digest:        50 + r,
		},
	)
	if err != nil {
		t.Fatal(err)
	}
	cp := uint64(topo.CPSize)
	if a.WriteFrontier != 100 || a.WriteIdle != (cp == 1) || a.LoadFrontier != 7 || !a.LoadDone {
		t.Errorf(
			"agreement %+v: want write frontier 100, idle only at cp 1, load frontier 7 and done",
			a,
		)
	}
	if a.DigestMin != 50 || a.DigestMax != 50+cp-1 {
		t.Errorf("digests %d..%d, want 50..%d", a.DigestMin, a.DigestMax, 50+cp-1)
	}
	want := report.CollectiveStats{Count: 1, CommSizeMin: topo.CPSize, CommSizeMax: topo.CPSize}
	if cp == 1 {
		want = report.CollectiveStats{Skipped: 1}
	}
	if got := c.cons.stats[cache.StepConsensus]; got.Count != want.Count ||
		got.Skipped != want.Skipped ||
		got.CommSizeMin != want.CommSizeMin ||
		got.CommSizeMax != want.CommSizeMax {
		t.Errorf("stats %+v, want %+v", got, want)
	}
}

// A rank's failure travels in the error word: the failing rank gets its own error back, every other
// rank of the group a *cache.PeerFailure naming it, all from the same call.
func TestConsensusCarriesTheLowestFailingRank(t *testing.T) {
	c, topo := testConsensus(t)
	failing := min(1, topo.CPSize-1)
	var own error
	if topo.CPRank >= failing {
		own = &cache.LocalFailure{Code: cache.FailureCopy, Err: errors.New("copy broke")}
	}
	_, err := c.agree(cache.StepConsensus, cache.ProbeVote{Failure: own})
	var peer *cache.PeerFailure
	switch {
	case topo.CPRank == failing && err != own:
		t.Errorf("failing CP rank %d got %v, want its own error", topo.CPRank, err)
	case topo.CPRank != failing && (!errors.As(err, &peer) || peer.CPRank != failing ||
		peer.Code != cache.FailureCopy || peer.Group != topo.CPGroup):
		t.Errorf(
			"CP rank %d got %v, want a peer failure of CP rank %d, code %v",
			topo.CPRank,
			err,
			failing,
			cache.FailureCopy,
		)
	}
	// The next call is clean: nothing sticks.
	if _, err := c.agree(cache.StepConsensus, cache.ProbeVote{}); err != nil {
		t.Errorf("the call after a failure: %v", err)
	}
}

// Ranks that enter different kinds of consensus are told so, by name, instead of pairing silently.
func TestConsensusOutOfStepIsANamedError(t *testing.T) {
	c, topo := testConsensus(t)
	if topo.CPSize == 1 {
		t.Skip("a single-rank group has nobody to be out of step with")
	}
	kind := cache.StepConsensus
	if topo.CPRank == 0 {
		kind = cache.FlushConsensus
	}
	_, err := c.agree(kind, cache.ProbeVote{})
	var oos *cache.OutOfStepError
	if !errors.As(err, &oos) || !strings.Contains(err.Error(), "step call #1") ||
		!strings.Contains(err.Error(), "flush call #1") {
		t.Errorf(
			"CP rank %d: %v, want collectives out of step naming the step and the flush call",
			topo.CPRank,
			err,
		)
	}
}

// A diverged rank can decide alone to make the l3_prefetch call (a step whose prefetch counts no
// step consensus carried: its tree, which the divergence changed, says so) while its peers enter
// the step consensus. The two calls must pair over MPI, whatever the transport, and the digests
// they carry must name the divergence, not leave the group in unpaired collectives until the
// watchdog names a wait (issue 37, job seed 2980954609015642673 of the simulator). The last CP rank
// diverged: its digest differs, and it alone enters l3_prefetch.
func TestADivergedRankAloneInTheL3PrefetchCallIsCaughtAsADivergence(t *testing.T) {
	c, topo := testConsensus(t)
	if topo.CPSize == 1 {
		t.Skip("a single-rank group cannot diverge")
	}
	const batchRequests = 3
	c.probe.WithL3(batchRequests)
	c.cons.watchdog = spmd.NewWatchdog(
		20*time.Second,
		topo.WorldRank,
		nil,
	) // a hang fails the test, named as one
	t.Cleanup(c.cons.watchdog.Stop)
	diverged := topo.CPRank == topo.CPSize-1
	var err error
	if diverged {
		err = c.probe.PrefetchCount([]uint64{2, 0, 1}, 0xd1f)
	} else {
		_,
			err = c.agree(
			cache.StepConsensus,
			cache.ProbeVote{WriteFrontier: 4, WriteIdle: true, LoadDone: true, Digest: 0xa9},
		)
	}
	var div *cache.DivergenceError
	if !errors.As(err, &div) {
		t.Fatalf("CP rank %d: %v, want a placement divergence", topo.CPRank, err)
	}
	if len(div.Digests) != topo.CPSize || div.Digests[topo.CPSize-1] != 0xd1f ||
		div.Digests[0] != 0xa9 ||
		div.OutOfStep == nil {
		t.Errorf(
			"CP rank %d: divergence %+v: want every rank's digest, the last one's 0xd1f, and the calls out of step",
			topo.CPRank,
			div,
		)
	}
	if msg := err.Error(); !strings.Contains(msg, "step call #1") ||
		!strings.Contains(msg, "l3_prefetch call #1") {
		t.Errorf("CP rank %d: %q does not name both calls", topo.CPRank, msg)
	}
}

// runErr runs opts on every rank and checks that no shared memory is left, whatever the outcome.
func runErr(t *testing.T, opts *config.Options) (*report.Report, error) {
	t.Helper()
	return runErrTesting(t, opts, checked())
}

// runErrTesting is runErr with a test's levers.
func runErrTesting(t *testing.T, opts *config.Options, tst *Testing) (*report.Report, error) {
	t.Helper()
	r, err := runTesting(testJob(t), opts, tst)
	checkNoLeakedSegments(t)
	return r, err
}

func TestCopyErrorIsAgreedByTheWholeGroup(t *testing.T) {
	cp, _ := testLayout()
	failing := cp - 1 // the last rank of group 0
	opts := smallOptions()
	opts.InjectCopyError = config.Injection{Rank: failing, Step: 3, Set: true}
	_, err := runErr(t, opts)
	rank := testWorld.Rank()
	var lf *cache.LocalFailure
	var peer *cache.PeerFailure
	switch {
	case rank == failing:
		if !errors.As(err, &lf) || lf.Code != cache.FailureCopy ||
			!errors.Is(err, errInjectedCopy) {
			t.Fatalf("failing rank %d: %v, want its own copy failure", rank, err)
		}
	case rank < cp:
		if !errors.As(err, &peer) || peer.CPRank != failing || peer.Code != cache.FailureCopy ||
			peer.Step < 3 {
			t.Fatalf(
				"rank %d: %v, want a peer failure naming CP rank %d's copy error at step 3 or later",
				rank,
				err,
				failing,
			)
		}
	default:
		if !errors.As(err, new(spmd.PeerFailedError)) {
			t.Fatalf("rank %d of another group: %v, want the peer-failure error", rank, err)
		}
	}
	var shared *spmd.SharedError
	if !errors.As(err, &shared) || shared.Speaker != (rank == failing) {
		t.Errorf(
			"rank %d: speaker %v, want only the failing rank %d to speak",
			rank,
			shared != nil && shared.Speaker,
			failing,
		)
	}
}

// A flush asserts before it resets: a divergence between the last step consensus and the flush is
// caught there, not forgiven.
func TestFlushCatchesADivergenceBeforeItsReset(t *testing.T) {
	cp, _ := testLayout()
	if cp == 1 {
		t.Skip("a single-rank CP group cannot diverge")
	}
	opts := smallOptions()
	opts.FlushEvery, opts.PlacementAssertEvery = 6, 0
	opts.InjectDivergence = config.Injection{
		Rank: cp - 1,
		Step: 6,
		Set:  true,
	} // after step 6's consensus, before its flush
	_, err := runErr(t, opts)
	var div *cache.DivergenceError
	if testWorld.Rank() < cp {
		if !errors.As(err, &div) || div.Step != 6 || !strings.Contains(div.Where, "flush") ||
			div.Digests[cp-1] == div.Digests[0] {
			t.Fatalf(
				"rank %d: %v, want the divergence caught by step 6's flush",
				testWorld.Rank(),
				err,
			)
		}
	}
}

// A Reset that forgets the free bitmap passes a digest-and-free-count check; the state hash against
// a fresh allocator catches it, and the run fails.
func TestBrokenResetFailsTheRun(t *testing.T) {
	restore := pool.BreakResetForTest()
	defer restore()
	opts := smallOptions()
	_, err := runErr(t, opts)
	var lf *cache.LocalFailure
	var peer *cache.PeerFailure
	if !(errors.As(err, &lf) && lf.Code == cache.FailureFlush) &&
		!(errors.As(err, &peer) && peer.Code == cache.FailureFlush) &&
		!errors.As(err, new(spmd.PeerFailedError)) {
		t.Fatalf("rank %d: %v, want the flush check to fail the run", testWorld.Rank(), err)
	}
	if lf != nil && !strings.Contains(lf.Error(), "state hash") {
		t.Errorf("the message does not say what differs: %v", lf)
	}
}

// Committing on a rank's own frontier instead of the group's MIN is the bug the commit audit exists
// for: with one rank's copies slowed and the placement assert off, the audit alone must see the
// early commits.
func TestAuditCatchesCommitsBeforeEveryRankFinished(t *testing.T) {
	cp, _ := testLayout()
	if cp == 1 {
		t.Skip("with one rank every commit follows the only copy")
	}
	opts := smallOptions()
	if !cache.BugsCompiled {
		t.Skip(
			"needs the deliberate bugs: the test binary of make test-mpi is built with -tags simbugs",
		)
	}
	tst := checked()
	tst.Core.Bugs = cache.Bugs(0).With(cache.BugCommitOnLocalFrontier).With(cache.BugAssertOff)
	tst.SlowCopyRank = config.Injection{Rank: cp - 1, Set: true}
	opts.WatchdogTimeout = 120 * time.Second
	r, err := runErrTesting(t, opts, tst)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verify.AuditObjects == 0 || r.Verify.AuditMismatches == 0 || !r.Failed() {
		t.Errorf(
			"audit: %d objects, %d wrong, failed %v: want the early commits caught",
			r.Verify.AuditObjects,
			r.Verify.AuditMismatches,
			r.Failed(),
		)
	}
	// The report says which check failed and on which ranks, for a script that reads it.
	if f := r.Failure; f == nil || !strings.Contains(f.Check, "audit mismatch (world ranks [") ||
		r.Verdict() != "FAILED" {
		t.Errorf(
			"the report's failure: %+v, verdict %q; want the audit mismatch and its ranks",
			f,
			r.Verdict(),
		)
	}
}

func TestCleanRunAuditsEveryCommitAndCallsOncePerStep(t *testing.T) {
	opts := smallOptions()
	opts.Synthetic.FlushEvery = 0 // no flush: every step makes exactly one consensus call
	r, err := runErr(t, opts)
	if err != nil {
		t.Fatal(err)
	}
	if r.Verify.AuditObjects != r.Backup.Committed || r.Verify.AuditMismatches != 0 || r.Failed() ||
		r.Failure != nil {
		t.Errorf(
			"audit: %d objects of %d committed, %d wrong",
			r.Verify.AuditObjects,
			r.Backup.Committed,
			r.Verify.AuditMismatches,
		)
	}
	if r.CP > 1 && (r.Consensus.CallsPerStep != 1 || r.Consensus.Calls != r.Steps+int64(r.DP)) {
		t.Errorf(
			"consensus: %d calls, %.3f per step over %d steps; want one a step and one final per group",
			r.Consensus.Calls,
			r.Consensus.CallsPerStep,
			r.Steps,
		)
	}
	if r.CP == 1 && (r.Consensus.Calls != 0 || r.Consensus.Skipped == 0) {
		t.Errorf(
			"cp 1: %d consensus calls ran, %d skipped; want none run",
			r.Consensus.Calls,
			r.Consensus.Skipped,
		)
	}
}
