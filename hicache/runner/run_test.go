package runner

import (
	"errors"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner/runnertest"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/pool"
)

// The SPMD tests' fixtures are runnertest's, which validate's tests share.

func testLayout() (cp, dp int) { return runnertest.Layout(testWorld) }

func testJob(t *testing.T) *spmd.Job {
	t.Helper()
	job := runnertest.Job(t, testWorld)
	noteDeviceRuns(t)
	return job
}

// smallOptions is runnertest.SmallOptions for this launch's replicas.
func smallOptions() *config.Options {
	_, dp := testLayout()
	return runnertest.SmallOptions(dp)
}

// checked is every test's levers on its runs: the core's step invariants and its eviction model
// checked.
func checked() *Testing { return &Testing{Core: runnertest.CheckedCore} }

func checkNoLeakedSegments(t *testing.T) {
	t.Helper()
	runnertest.CheckNoLeakedSegments(t)
}

func TestRunIsCleanAndExercisesEveryPath(t *testing.T) {
	for _, layout := range []pool.Layout{pool.LayerFirst, pool.PageFirst} {
		for _, policy := range []cache.WritePolicy{cache.WriteThrough, cache.WriteThroughSelective, cache.WriteBack} {
			opts := smallOptions()
			opts.Layout, opts.Policy = layout, policy
			// commits at every step: every path is taken, however loaded the machine
			opts.SyncCopies = true
			if policy == cache.WriteBack {
				// write_back backs up only what L1 evicts, and evicts only what a request needs:
				// smaller L1 and L2, so that L2 still fills and evicts at every layout, CP8DP2
				// included.
				opts.DevicePages, opts.L2Slots = 128, 128
			}
			r, err := runTesting(testJob(t), opts, checked())
			if err != nil {
				t.Fatalf("%v %v: %v", layout, policy, err)
			}
			name := layout.String() + "/" + policy.String()
			if r.Placement.Divergences != 0 || r.Verify.Mismatches != 0 {
				t.Errorf(
					"%s: %d divergences, %d mismatches",
					name,
					r.Placement.Divergences,
					r.Verify.Mismatches,
				)
			}
			// write_through_selective backs up only nodes hit twice: too little to fill L2 in this
			// small workload.
			fillsL2 := policy != cache.WriteThroughSelective
			if r.Hits.L2Tokens == 0 || (fillsL2 && r.Backup.L2Evictions == 0) || r.Flushes == 0 ||
				r.L1.Evictions == 0 ||
				r.Verify.PagesChecked == 0 {
				t.Errorf(
					"%s: a path was not exercised: L2 hits %d, L2 evictions %d, flushes %d, L1 evictions %d, pages checked %d",
					name,
					r.Hits.L2Tokens,
					r.Backup.L2Evictions,
					r.Flushes,
					r.L1.Evictions,
					r.Verify.PagesChecked,
				)
			}
			if r.Backup.Committed != r.Backup.Reserved {
				t.Errorf(
					"%s: %d backups reserved but %d committed after the final drain",
					name,
					r.Backup.Reserved,
					r.Backup.Committed,
				)
			}
			checkReportScoping(t, r)
		}
	}
	checkNoLeakedSegments(t)
}

// checkReportScoping pins the scoping rule: every consensus collective ran on a communicator of
// exactly cp ranks, and none ran on a single-rank group.
func checkReportScoping(t *testing.T, r *report.Report) {
	t.Helper()
	if len(r.Groups) != r.DP {
		t.Fatalf("%d groups in the report, want %d", len(r.Groups), r.DP)
	}
	for _, g := range r.Groups {
		if len(g.Hosts) != r.CP {
			t.Errorf("group %d lists %d hosts, want %d", g.Group, len(g.Hosts), r.CP)
		}
		for kind, s := range g.Collectives {
			switch {
			case r.CP == 1 && s.Count != 0:
				t.Errorf("group %d: %s ran %d times on a single-rank group", g.Group, kind, s.Count)
			case r.CP > 1 && (kind == "step" || kind == "final") && s.Count == 0:
				t.Errorf("group %d: %s never ran", g.Group, kind)
			case r.CP > 1 && s.Count > 0 && (s.CommSizeMin != r.CP || s.CommSizeMax != r.CP):
				t.Errorf(
					"group %d: %s ran on communicators of %d..%d ranks, want %d",
					g.Group,
					kind,
					s.CommSizeMin,
					s.CommSizeMax,
					r.CP,
				)
			}
		}
	}
}

func TestInjectedDivergenceIsCaughtAtTheNextAssert(t *testing.T) {
	cp, _ := testLayout()
	if cp == 1 {
		t.Skip("a single-rank CP group cannot diverge: the placement assert is skipped by design")
	}
	opts := smallOptions()
	opts.PlacementAssertEvery = 2
	opts.InjectDivergence = config.Injection{
		Rank: cp - 1,
		Step: 3,
		Set:  true,
	} // the last rank of group 0
	_, err := runTesting(testJob(t), opts, checked())
	var div *cache.DivergenceError
	if testWorld.Rank() < cp {
		if !errors.As(err, &div) {
			t.Fatalf("rank %d: run returned %v, want a placement divergence", testWorld.Rank(), err)
		}
		if div.Step != 4 || div.Group != 0 || len(div.Digests) != cp ||
			div.Digests[cp-1] == div.Digests[0] {
			t.Errorf(
				"divergence report %+v: want step 4, group 0, the last rank's digest different",
				div,
			)
		}
	} else if !errors.As(err, new(spmd.PeerFailedError)) {
		t.Errorf("rank %d of an unperturbed group: %v, want the peer-failure error", testWorld.Rank(), err)
	}
	checkNoLeakedSegments(t)
}

// TestStagedDeviceContentDecidesAlike: the GPU build fills and checks device content through a
// staging buffer, the CPU build in place; with copies drained every step both make every decision
// alike and check as many pages, and a wrong byte in the staged path is still found (the device
// pages hold what the fill wrote).
func TestStagedDeviceContentDecidesAlike(t *testing.T) {
	var reports [2]*report.Report
	for i, staged := range []bool{false, true} {
		opts := smallOptions()
		opts.SyncCopies = true
		tst := checked()
		tst.StagedDeviceContent = staged
		r, err := runTesting(testJob(t), opts, tst)
		if err != nil {
			t.Fatalf("staged %v: %v", staged, err)
		}
		reports[i] = r
	}
	a, b := reports[0], reports[1]
	if a.Hits != b.Hits || a.Verify != b.Verify || a.Verify.PagesChecked == 0 ||
		a.Verify.Mismatches != 0 {
		t.Errorf(
			"in place: hits %+v, verify %+v; staged: hits %+v, verify %+v",
			a.Hits,
			a.Verify,
			b.Hits,
			b.Verify,
		)
	}
	checkNoLeakedSegments(t)
}
