package runner

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
)

// TestFullShmFailsAtStartOnEveryRank fakes a /dev/shm that filled up between CheckShmFits and the
// creation of the slab, in the last CP group only (at 16 ranks, group 1 of CP8DP2): every rank of
// the job must return the agreed error, the lowest failing rank must speak with the bytes needed
// and free, and no segment may be left behind.
func TestFullShmFailsAtStartOnEveryRank(t *testing.T) {
	cp, _ := testLayout()
	// CP-rank 0 of the last group: the only rank that creates its slab
	failingCreator := testWorld.Size() - cp
	opts := smallOptions()
	tst := checked()
	tst.ReserveShm = func(f *os.File, size int64) error {
		if testWorld.Rank() == failingCreator {
			return syscall.ENOSPC
		}
		return shm.Fallocate(f, size)
	}
	_, err := runPass(testJob(t), opts, Pass{}, tst)
	var shared *spmd.SharedError
	if !errors.As(err, &shared) {
		t.Fatalf(
			"a full /dev/shm in group %d: %v, want an agreed *spmd.SharedError on every rank",
			failingCreator/cp,
			err,
		)
	}
	if speaker := testWorld.Rank() == failingCreator; shared.Speaker != speaker {
		t.Fatalf(
			"speaker %v, want %v (world rank %d creates the failing group's slab)",
			shared.Speaker,
			speaker,
			failingCreator,
		)
	}
	if shared.Speaker {
		msg := err.Error()
		for _, want := range []string{"reserve the", "bytes", shm.Dir + " has", "free", "no space left on device"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error %q does not say %q", msg, want)
			}
		}
	}
	if leftover, _ := shm.JobSegments(testJobID); len(leftover) != 0 {
		t.Errorf("segments left behind: %v", leftover)
	}
	// every rank has checked before any other test creates a segment
	if err := testWorld.Barrier(); err != nil {
		t.Fatal(err)
	}
}
