package runner

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
)

// The L3's fault paths under a real run (SPMD: every rank runs them, at 1, 2, 8 and 16 ranks).

// TestL3WriterRefusesABlockThatIsNotItsContent: a block whose gathered parts are not its content
// (as when a rank reused a slot under the writer: the flush race, which the simulator shows caught
// as the deliberate bug flush_waits_only_on_writer) is refused by its writer's check: the job that
// made it fails, and nothing wrong is published for the next job to load.
func TestL3WriterRefusesABlockThatIsNotItsContent(t *testing.T) {
	cp, _ := testLayout()
	dir := sharedTempDir(t)
	opts := l3Options(dir)
	tst := checked()
	// the last CP rank of each group gathers wrong bytes
	tst.L3.CorruptGathered = testWorld.Rank()%cp == cp-1
	r, err := runTesting(testJob(t), opts, tst)
	if err != nil {
		t.Fatal(err)
	}
	if r.L3.WriteMismatches == 0 || !r.Failed() ||
		!strings.Contains(r.RunFailure().Error(), "L3 blocks refused") {
		t.Fatalf(
			"%d blocks refused, failed %v: want the job that made them to fail",
			r.L3.WriteMismatches,
			r.Failed(),
		)
	}
	next, err := runTesting(testJob(t), l3Options(dir), checked())
	checkL3Run(t, "the next job", next, err)
	if next.Hits.L3Tokens == 0 {
		t.Errorf("the next job hit no L3 block: the check proves nothing")
	}
	checkNoLeakedSegments(t)
}

// TestL3HungReadsEndAtTheirDeadline: reads that never return (a hung filesystem, as
// Testing.L3.HangReads holds them) are given up at their deadline as failed reads, agreed misses,
// under the policies that have one: the run ends, nothing wrong, the timeouts counted.
func TestL3HungReadsEndAtTheirDeadline(t *testing.T) {
	dir := sharedTempDir(t)
	_, dp := testLayout()
	// a few conversations: each step with a hung read waits out its deadline
	few := func() *config.Options {
		opts := l3Options(dir)
		opts.Synthetic.Conversations, opts.Synthetic.TurnsMax = 2*dp, 3
		return opts
	}
	r, err := runTesting(testJob(t), few(), checked())
	checkL3Run(t, "fill", r, err)
	for _, policy := range []cache.PrefetchPolicy{cache.PrefetchTimeout, cache.PrefetchBestEffort} {
		opts := few()
		opts.L3.PrefetchPolicy = policy
		tst := checked()
		tst.L3.HangReads = true
		opts.WatchdogTimeout = 2 * time.Second // deadlines are at most half of it: 1 s
		start := time.Now()
		r, err := runTesting(testJob(t), opts, tst)
		checkL3Run(t, policy.String()+" with hung reads", r, err)
		if r.L3.ReadTimeouts == 0 || r.L3.Reads != 0 {
			t.Errorf(
				"%s: %d reads given up at their deadline, %d read: want every read given up",
				policy,
				r.L3.ReadTimeouts,
				r.L3.Reads,
			)
		}
		t.Logf(
			"%s: %d hung reads given up, run of %v",
			policy,
			r.L3.ReadTimeouts,
			time.Since(start).Round(time.Millisecond),
		)
	}
	checkNoLeakedSegments(t)
}

// TestL3PrefetchesDroppedByAFlushAreCounted: a flush after every step drops every prefetch before
// its request is served; each is counted and said, not lost.
func TestL3PrefetchesDroppedByAFlushAreCounted(t *testing.T) {
	dir := sharedTempDir(t)
	r, err := runTesting(testJob(t), l3Options(dir), checked())
	checkL3Run(t, "fill", r, err)
	opts := l3Options(dir)
	opts.FlushEvery = 1
	r, err = runTesting(testJob(t), opts, checked())
	checkL3Run(t, "flush every step", r, err)
	if r.L3.Prefetches == 0 || r.L3.PrefetchFlushed == 0 {
		t.Fatalf(
			"%d prefetches, %d dropped by a flush: want the drops counted",
			r.L3.Prefetches,
			r.L3.PrefetchFlushed,
		)
	}
	var b strings.Builder
	r.WriteSummary(&b)
	if !strings.Contains(b.String(), "dropped by a flush") {
		t.Errorf("the summary does not say it:\n%s", b.String())
	}
	checkNoLeakedSegments(t)
}

// TestL3AllCorruptIsNoWorseThanNoL3: over a directory whose every block is corrupt (a payload byte
// flipped), a run hits as many tokens as the same run with no L3 (copies synchronous and prefetches
// waited for, so that both runs are exact; an L1 small enough that a third of the hits are the
// L2's): its failed prefetches neither pile up in the L2 (which cost a fifth of the hits) nor keep
// being tried: a handful over the run, one at a time, at steps ever further apart. Those few still
// move later evictions, which moves the hits by about 1% either way (as the copies' timing moves
// two runs with no L3 at np 8), hence the tolerance.
func TestL3AllCorruptIsNoWorseThanNoL3(t *testing.T) {
	dir := sharedTempDir(t)
	shape := func(opts *config.Options) *config.Options {
		opts.SyncCopies, opts.DevicePages = true, 48
		return opts
	}
	r, err := runTesting(testJob(t), shape(l3Options(dir)), checked())
	checkL3Run(t, "fill", r, err)
	if testWorld.Rank() == 0 {
		flipPayloadBytes(t, dir)
	}
	testWorld.Barrier()
	none, err := runTesting(testJob(t), shape(smallOptions()), checked())
	if err != nil {
		t.Fatal(err)
	}
	corrupt, err := runTesting(testJob(t), shape(l3Options(dir)), checked())
	checkL3Run(t, "all corrupt", corrupt, err)
	hits := func(r *report.Report) int64 { return r.Hits.L1Tokens + r.Hits.L2Tokens + r.Hits.L3Tokens }
	prompt := none.Hits.L1Tokens + none.Hits.L2Tokens + none.Hits.MissTokens
	if corrupt.L3.Corrupt == 0 || none.Hits.L2Tokens < hits(none)/4 {
		t.Fatalf(
			"%d corrupt blocks read, %d of %d hit tokens from the L2: the run proves nothing",
			corrupt.L3.Corrupt,
			none.Hits.L2Tokens,
			hits(none),
		)
	}
	if hits(corrupt) < hits(none)-prompt/50 || corrupt.L3.Prefetches > 8 {
		t.Errorf(
			"over an all-corrupt L3: %d hit tokens (L2 %d) after %d prefetches of %d corrupt blocks; with no L3: %d (L2 %d) of %d",
			hits(
				corrupt,
			),
			corrupt.Hits.L2Tokens,
			corrupt.L3.Prefetches,
			corrupt.L3.Corrupt,
			hits(none),
			none.Hits.L2Tokens,
			prompt,
		)
	}
	checkNoLeakedSegments(t)
}

// flipPayloadBytes corrupts every block file under dir: its first payload byte, after the 64-byte
// header.
func flipPayloadBytes(t *testing.T, dir string) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !strings.HasSuffix(path, ".blk") {
			return err
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, 64); err != nil {
			return err
		}
		b[0] ^= 0xff
		_, err = f.WriteAt(b, 64)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
