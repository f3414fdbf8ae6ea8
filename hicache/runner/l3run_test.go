package runner

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/runner/runnertest"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/pool"
)

// SPMD tests of the L3 tier: every rank runs them, over one directory shared by the job.

// sharedTempDir is a directory every rank of the job uses (runnertest.SharedTempDir).
func sharedTempDir(t *testing.T) string {
	t.Helper()
	return runnertest.SharedTempDir(t, testWorld)
}

// loggedJob is testJob with its log in a buffer.
func loggedJob(t *testing.T) (*spmd.Job, *bytes.Buffer) {
	job := testJob(t)
	var buf bytes.Buffer
	job.Log = slog.New(slog.NewTextHandler(&buf, nil))
	return job, &buf
}

// checkSaidOnce: the log has the message once, with its cause.
func checkSaidOnce(t *testing.T, log *bytes.Buffer, message, cause string) {
	t.Helper()
	if n := strings.Count(log.String(), message); n != 1 || !strings.Contains(log.String(), cause) {
		t.Errorf("%q said %d times, want once with %q:\n%s", message, n, cause, log)
	}
}

// l3Options is smallOptions with an L3 in dir: two-page blocks, and every agreed prefetch waited
// for.
func l3Options(dir string) *config.Options {
	opts := smallOptions()
	opts.L3 = config.L3Options{
		Dir:               dir,
		Bytes:             1 << 30,
		BlockTokens:       32,
		PrefetchPolicy:    cache.PrefetchWaitComplete,
		PrefetchThreshold: 32,
	}
	return opts
}

// checkL3Run: nothing wrong, at any layout and fault.
func checkL3Run(t *testing.T, name string, r *report.Report, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if r.Placement.Divergences != 0 || r.Verify.Mismatches != 0 || r.Verify.AuditMismatches != 0 ||
		r.L3 == nil ||
		r.L3.WriteMismatches != 0 {
		t.Fatalf(
			"%s: %d divergences, %d mismatches, %d audit mismatches, L3 report %+v",
			name,
			r.Placement.Divergences,
			r.Verify.Mismatches,
			r.Verify.AuditMismatches,
			r.L3,
		)
	}
}

// TestL3WritesAndWarmRestartAtEveryPolicyAndLayout: both write policies, both layouts: a first run
// stores blocks, a second over the same directory serves some of its prompts from them, every page
// verified, no divergence.
func TestL3WritesAndWarmRestartAtEveryPolicyAndLayout(t *testing.T) {
	for _, layout := range []pool.Layout{pool.LayerFirst, pool.PageFirst} {
		for _, policy := range []cache.L3WritePolicy{cache.L3WriteThrough, cache.L3WriteBack} {
			dir := sharedTempDir(t)
			name := layout.String() + "/" + policy.String()
			for pass := range 2 {
				opts := l3Options(dir)
				opts.Layout, opts.L3.WritePolicy = layout, policy
				r, err := runTesting(testJob(t), opts, checked())
				checkL3Run(t, name, r, err)
				if pass == 0 && r.L3.Writes == 0 {
					t.Errorf("%s: the first run wrote no block", name)
				}
				if pass == 1 && (r.Hits.L3Tokens == 0 || r.L3.Reads == 0) {
					t.Errorf(
						"%s: the second run got %d L3 hit tokens from %d blocks read",
						name,
						r.Hits.L3Tokens,
						r.L3.Reads,
					)
				}
				if rd := r.L3.ReadUs; pass == 1 && (rd.P50 <= 0 || rd.P99 < rd.P50) {
					t.Errorf(
						"%s: block read latency p50 %v us, p99 %v us over %d reads",
						name,
						rd.P50,
						rd.P99,
						r.L3.Reads,
					)
				}
			}
		}
	}
	checkNoLeakedSegments(t)
}

// TestL3RanksThatSeeDifferentBlocksAgree: one rank's existence checks miss a third of the blocks,
// another rank's reads all fail. The counts are agreed by MIN and the failed reads through the
// consensus, so every rank places the same objects (no divergence), nothing wrong is served (no
// mismatch), and the failed reads are misses.
func TestL3RanksThatSeeDifferentBlocksAgree(t *testing.T) {
	dir := sharedTempDir(t)
	r, err := runTesting(testJob(t), l3Options(dir), checked())
	checkL3Run(t, "first run", r, err)
	cp, _ := testLayout()
	opts := l3Options(dir)
	tst := checked()
	tst.L3.HideBlocks = testWorld.Rank()%cp == 0
	tst.L3.FailReads = testWorld.Rank()%cp == cp-1
	job, log := loggedJob(t)
	r, err = runTesting(job, opts, tst)
	checkL3Run(t, "second run", r, err)
	if r.L3.PrefetchMisses == 0 || r.L3.ReadFailures == 0 {
		t.Errorf(
			"%d prefetches cut short, %d failed reads: the failing reader was never asked",
			r.L3.PrefetchMisses,
			r.L3.ReadFailures,
		)
	}
	if tst.L3.FailReads { // the only rank whose reads fail, so r's failed reads are its own
		checkSaidOnce(t, log, "L3 block read failed", errInjectedRead.Error())
	}
	if cp > 2 && r.Hits.L3Tokens == 0 {
		t.Errorf("no L3 hit: the blocks of the ranks that read well were never used")
	}
	checkNoLeakedSegments(t)
}

// TestL3WriteErrorsAreCountedAndTheRunGoesOn: a filesystem that refuses every write (as a full one
// does) drops the blocks, counts them, and the run ends OK: the L2 objects the writes held are
// released all the same.
func TestL3WriteErrorsAreCountedAndTheRunGoesOn(t *testing.T) {
	opts := l3Options(sharedTempDir(t))
	tst := checked()
	tst.L3.FailWrites = true
	// backups commit in their step, so the run's load-backs do not hang on the machine's load
	opts.SyncCopies = true
	job, log := loggedJob(t)
	r, err := runTesting(job, opts, tst)
	checkL3Run(t, "full filesystem", r, err)
	// CP rank 0 writes every prompt's first block
	if cp, _ := testLayout(); testWorld.Rank()%cp == 0 {
		checkSaidOnce(t, log, "L3 block write failed", "no space left on device")
	}
	if r.L3.WriteErrors == 0 || r.L3.Writes != 0 {
		t.Errorf(
			"%d write errors, %d blocks written; want every write failed and counted",
			r.L3.WriteErrors,
			r.L3.Writes,
		)
	}
	if r.Backup.Committed == 0 || r.Verify.PagesChecked == 0 {
		t.Errorf(
			"%d backups committed, %d pages verified: the run stopped caching",
			r.Backup.Committed,
			r.Verify.PagesChecked,
		)
	}
	checkNoLeakedSegments(t)
}

// TestL3ReadOnlyDirectoryIsServed: a directory holding valid blocks that refuses writes (a
// pre-warmed cache on a read-only mount; the test's filesystem refuses them, since root writes
// anywhere) is no invalid --l3-dir: its blocks are read and served, and the blocks the run would
// have written are skipped and counted, not errors.
func TestL3ReadOnlyDirectoryIsServed(t *testing.T) {
	dir := sharedTempDir(t)
	r, err := runTesting(testJob(t), l3Options(dir), checked())
	checkL3Run(t, "warm-up", r, err)
	opts := l3Options(dir)
	// new conversations beside the warm ones (the same): blocks to write
	opts.Synthetic.Conversations *= 2
	tst := checked()
	tst.L3.ReadOnly = true
	job, log := loggedJob(t)
	r, err = runTesting(job, opts, tst)
	checkL3Run(t, "read-only", r, err)
	if r.Hits.L3Tokens == 0 || r.L3.WritesSkipped == 0 || r.L3.Writes != 0 ||
		r.L3.WriteErrors != 0 {
		t.Errorf(
			"%d L3 hit tokens, %d writes skipped, %d written, %d write errors: want hits, and every write skipped",
			r.Hits.L3Tokens,
			r.L3.WritesSkipped,
			r.L3.Writes,
			r.L3.WriteErrors,
		)
	}
	if cp, _ := testLayout(); testWorld.Rank()%cp == 0 {
		checkSaidOnce(t, log, "the L3 directory is read-only", dir)
	}
	checkNoLeakedSegments(t)
}

// TestL3FlushWaitsForBlockWrites: a flush's own commit schedules block writes; with writes slowed,
// they are still reading the slab when the flush resets the allocator. The reset must wait for
// them, or the next pass loads blocks written from slots already reused (mismatches).
func TestL3FlushWaitsForBlockWrites(t *testing.T) {
	dir := sharedTempDir(t)
	for pass := range 2 {
		opts := l3Options(dir)
		opts.FlushEvery = 3
		tst := checked()
		tst.L3.SlowWrites = true
		r, err := runTesting(testJob(t), opts, tst)
		checkL3Run(t, fmt.Sprintf("pass %d", pass), r, err)
	}
	checkNoLeakedSegments(t)
}

// TestL3EveryPrefetchPolicyAgrees: with slowed reads, best_effort gives up prefetches whose reads
// are not agreed done when their request is served (their L2 objects are given back once the reads
// end), timeout and wait_complete wait; under every policy the group places the same objects and
// serves nothing wrong.
func TestL3EveryPrefetchPolicyAgrees(t *testing.T) {
	dir := sharedTempDir(t)
	r, err := runTesting(testJob(t), l3Options(dir), checked())
	checkL3Run(t, "fill", r, err)
	for _, policy := range []cache.PrefetchPolicy{
		cache.PrefetchBestEffort, cache.PrefetchTimeout, cache.PrefetchWaitComplete,
	} {
		opts := l3Options(dir)
		opts.L3.PrefetchPolicy = policy
		tst := checked()
		tst.L3.SlowReads = true
		r, err := runTesting(testJob(t), opts, tst)
		checkL3Run(t, policy.String(), r, err)
		if r.L3.Prefetches == 0 {
			t.Errorf("%s: no prefetch", policy)
		}
		if policy == cache.PrefetchBestEffort && r.L3.PrefetchTimeouts == 0 {
			t.Errorf(
				"best_effort with slowed reads: no prefetch given up; the path is not exercised",
			)
		}
		if policy != cache.PrefetchBestEffort &&
			(r.L3.PrefetchTimeouts != 0 || r.Hits.L3Tokens == 0) {
			t.Errorf(
				"%s: %d prefetches given up, %d L3 hit tokens",
				policy,
				r.L3.PrefetchTimeouts,
				r.Hits.L3Tokens,
			)
		}
	}
	checkNoLeakedSegments(t)
}

// TestL3BudgetEvicts: an L3 budget far below what a run stores evicts the least recently used
// blocks (CP rank 0 of each group keeps the budget for the blocks its group wrote) and the run goes
// on.
func TestL3BudgetEvicts(t *testing.T) {
	opts := l3Options(sharedTempDir(t))
	opts.L3.Bytes = 256 << 10
	r, err := runTesting(testJob(t), opts, checked())
	checkL3Run(t, "small budget", r, err)
	if r.L3.Writes == 0 || r.L3.Evictions == 0 {
		t.Errorf(
			"%d blocks written, %d evicted under a 256 KiB budget",
			r.L3.Writes,
			r.L3.Evictions,
		)
	}
	checkNoLeakedSegments(t)
}
