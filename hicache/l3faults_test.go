package hicache

import (
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The L3's fault paths under a real run (SPMD: every rank runs them, at 1, 2, 8 and 16 ranks).

// TestL3FlushRaceFailsTheJobThatMadeIt: with the flush that waits for its block writes on the writer rank alone
// (the deliberate bug flush_waits_only_on_writer, as the code was), a writer rank slowed and a flush after every
// step, the fast ranks back up new KV into the slots the writer is still gathering; the writer's check of its
// block against the content function refuses the block, and the job that made it fails instead of the next job
// that would load it. Without the bug, the same run is clean.
func TestL3FlushRaceFailsTheJobThatMadeIt(t *testing.T) {
	cp, _ := testLayout()
	if cp == 1 || !cache.BugsCompiled {
		t.Skip("needs two ranks in a group and the deliberate bugs (make test-mpi's binaries carry them)")
	}
	for _, bug := range []bool{false, true} {
		caught := false
		for try := 0; try < 3 && !caught; try++ {
			opts := l3Options(sharedTempDir(t))
			opts.FlushEvery, opts.L3.PrefetchPolicy = 1, PrefetchBestEffort
			opts.L3.testSlowWrites = testWorld.Rank()%cp == cp-1 // the last CP rank of each group writes slowly
			if bug {
				opts.testBugs = cache.Bugs(0).With(cache.BugFlushWaitsOnlyOnWriter)
			}
			r, err := Run(testJob(t), opts)
			if err != nil {
				t.Fatalf("bug %v: %v", bug, err)
			}
			if !bug {
				checkL3Run(t, "the fixed flush", r, err)
				if r.L3.WriteMismatches != 0 || r.Failed() {
					t.Fatalf("the fixed flush: %d blocks refused, failed %v", r.L3.WriteMismatches, r.Failed())
				}
				break
			}
			caught = r.Failed() && r.L3.WriteMismatches+r.Verify.Mismatches+r.Verify.AuditMismatches > 0
		}
		if bug && !caught {
			t.Errorf("three runs with the flush race: no block refused, no mismatch; the writer's check is not exercised")
		}
	}
	checkNoLeakedSegments(t)
}

// TestL3HungReadsEndAtTheirDeadline: reads that never return (a hung filesystem, as testHangReads holds them)
// are given up at their deadline as failed reads, agreed misses, under the policies that have one: the run ends,
// nothing wrong, the timeouts counted.
func TestL3HungReadsEndAtTheirDeadline(t *testing.T) {
	dir := sharedTempDir(t)
	_, dp := testLayout()
	few := func() *Options { // a few conversations: each step with a hung read waits out its deadline
		opts := l3Options(dir)
		opts.Synthetic.Conversations, opts.Synthetic.TurnsMax = 2*dp, 3
		return opts
	}
	r, err := Run(testJob(t), few())
	checkL3Run(t, "fill", r, err)
	for _, policy := range []PrefetchPolicy{PrefetchTimeout, PrefetchBestEffort} {
		opts := few()
		opts.L3.PrefetchPolicy, opts.L3.testHangReads = policy, true
		opts.WatchdogTimeout = 2 * time.Second // deadlines are at most half of it: 1 s
		start := time.Now()
		r, err := Run(testJob(t), opts)
		checkL3Run(t, policy.String()+" with hung reads", r, err)
		if r.L3.ReadTimeouts == 0 || r.L3.Reads != 0 {
			t.Errorf("%s: %d reads given up at their deadline, %d read: want every read given up", policy, r.L3.ReadTimeouts, r.L3.Reads)
		}
		t.Logf("%s: %d hung reads given up, run of %v", policy, r.L3.ReadTimeouts, time.Since(start).Round(time.Millisecond))
	}
	checkNoLeakedSegments(t)
}

// TestL3PrefetchesDroppedByAFlushAreCounted: a flush after every step drops every prefetch before its request is
// served; each is counted and said, not lost.
func TestL3PrefetchesDroppedByAFlushAreCounted(t *testing.T) {
	dir := sharedTempDir(t)
	r, err := Run(testJob(t), l3Options(dir))
	checkL3Run(t, "fill", r, err)
	opts := l3Options(dir)
	opts.FlushEvery = 1
	r, err = Run(testJob(t), opts)
	checkL3Run(t, "flush every step", r, err)
	if r.L3.Prefetches == 0 || r.L3.PrefetchFlushed == 0 {
		t.Fatalf("%d prefetches, %d dropped by a flush: want the drops counted", r.L3.Prefetches, r.L3.PrefetchFlushed)
	}
	var b strings.Builder
	r.WriteSummary(&b)
	if !strings.Contains(b.String(), "dropped by a flush") {
		t.Errorf("the summary does not say it:\n%s", b.String())
	}
	checkNoLeakedSegments(t)
}
