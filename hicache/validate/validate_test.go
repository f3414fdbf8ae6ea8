package validate

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/pool"
)

// The matrix under a real job: every row passes on a sound cache, and each row that guards a bug
// fails, alone, when that bug is in.

// TestValidateMatrixPasses: every row passes, and the rows that have nothing to compare at cp 1
// skip there.
func TestValidateMatrixPasses(t *testing.T) {
	v, err := validateTesting(testJob(t), smallOptions(), checked())
	if err != nil {
		t.Fatal(err)
	}
	cp, _ := testLayout()
	if len(v.Checks) != 7 {
		t.Fatalf("%d checks, want 7", len(v.Checks))
	}
	for _, c := range v.Checks {
		// At cp 1 these have nothing to compare (l3_roundtrip: no other rank to agree a failed read
		// with).
		skippable := c.Name == "placement_identical" || c.Name == "divergence_detected" ||
			c.Name == "l3_roundtrip"
		switch {
		case c.Result == "skip" && !(skippable && cp == 1):
			t.Errorf("%s skipped at cp %d", c.Name, cp)
		case c.Result != "skip" && skippable && cp == 1:
			t.Errorf("%s %s at cp 1, want skip: %s", c.Name, c.Result, c.Detail)
		case c.Result == "fail":
			t.Errorf("%s failed: %d wrong (%s)", c.Name, c.Wrong, c.Detail)
		}
	}
	checkNoLeakedSegments(t)
}

// validate's flush row uses the same whole-state check: a broken Reset fails the row (and only that
// row), and a workload without a flush still gets one to check.
func TestValidateFlushRowCatchesABrokenReset(t *testing.T) {
	for _, broken := range []bool{false, true} {
		if broken {
			defer pool.BreakResetForTest()()
		}
		opts := smallOptions()
		opts.Synthetic.FlushEvery = 0 // the workload flushes never: validate must flush on its own
		v, err := validateTesting(testJob(t), opts, checked())
		if err != nil {
			t.Fatalf("broken reset %v: %v", broken, err)
		}
		for _, c := range v.Checks {
			wantFail := broken && c.Name == "flush_reset"
			if (c.Result == "fail") != wantFail {
				t.Errorf("broken reset %v: %s %s (%s)", broken, c.Name, c.Result, c.Detail)
			}
			if c.Name == "flush_reset" && !strings.Contains(c.Detail, "rank-flush") {
				t.Errorf("flush row: %s", c.Detail)
			}
		}
		checkNoLeakedSegments(t)
	}
}

// TestValidateL3RowCatchesIgnoredReadFailures: validate's l3_roundtrip row passes on a sound cache
// and fails, alone, when the group's agreement on failed reads is ignored (blocks the failing rank
// never read are served).
func TestValidateL3RowCatchesIgnoredReadFailures(t *testing.T) {
	if cp, _ := testLayout(); cp == 1 {
		t.Skip("a single-rank group has no other rank's failed reads to agree on")
	}
	for _, broken := range []bool{false, true} {
		opts := smallOptions()
		tst := checked()
		tst.L3.IgnoreFailedReads = broken
		// Backups commit in their step, so the passes' load-backs (data_integrity's) do not hang on
		// the machine's load: under MPICH on a loaded machine a pass once had none.
		opts.SyncCopies = true
		v, err := validateTesting(testJob(t), opts, tst)
		if err != nil {
			t.Fatalf("broken %v: %v", broken, err)
		}
		for _, c := range v.Checks {
			// data_integrity counts the other passes' load-backs: the L3 passes' wrong bytes are
			// the L3 row's.
			wantFail := broken && c.Name == "l3_roundtrip"
			if (c.Result == "fail") != wantFail {
				t.Errorf("broken %v: %s %s (%s)", broken, c.Name, c.Result, c.Detail)
			}
		}
		checkNoLeakedSegments(t)
	}
}

// TestValidatesL3DirectoryIsInTheCleanUp: a signal or the watchdog that ends validate removes its
// L3 directory, whose blocks would otherwise outlive the job: the ranks that remove it at the end
// hold its removal in the job's clean-up from its making.
func TestValidatesL3DirectoryIsInTheCleanUp(t *testing.T) {
	job := testJob(t)
	dir, forget, err := validationL3Dir(job, sharedTempDir(t))
	if err != nil {
		t.Fatal(err)
	}
	defer forget()
	if err := testWorld.Barrier(); err != nil { // every rank has made it
		t.Fatal(err)
	}
	job.Cleanup.Run() // what the signal handler and the watchdog run before the process ends
	if err := testWorld.Barrier(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf(
			"validate's L3 directory %s is still there after the clean-up (stat: %v)",
			dir,
			err,
		)
	}
}
