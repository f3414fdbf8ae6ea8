package hicache

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// TestFallocateReservesAndRefusesWhatShmLacks runs the real reservation on a scratch file in /dev/shm (named
// outside the cphicache- prefix, so that no leak check mistakes it for a segment): a small one must be backed
// by memory at once, and one larger than /dev/shm's free space must fail with ENOSPC, not succeed sparsely.
func TestFallocateReservesAndRefusesWhatShmLacks(t *testing.T) {
	if testWorld.Rank() != 0 {
		return // a local file test: one rank is enough, and no collective follows
	}
	free, err := ShmFreeBytes()
	if err != nil || free <= 0 {
		t.Skipf("/dev/shm reports no size limit (%d bytes free, %v): tmpfs would try to back any size", free, err)
	}
	f, err := os.CreateTemp(shmDir, "cphitest-reserve-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	const small = 1 << 20
	if err := fallocateFile(f, small); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != small || st.Blocks*512 < small {
		t.Fatalf("after reserving %d bytes: size %d, %d bytes allocated", small, st.Size, st.Blocks*512)
	}
	if err := fallocateFile(f, free+1<<30); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("reserving %d bytes with %d free: %v, want ENOSPC", free+1<<30, free, err)
	}
}

// TestFullShmFailsAtStartOnEveryRank fakes a /dev/shm that filled up between CheckShmFits and the creation of the
// slab, in the last CP group only (at 16 ranks, group 1 of CP8DP2): every rank of the job must return the agreed
// error, the lowest failing rank must speak with the bytes needed and free, and no segment may be left behind.
func TestFullShmFailsAtStartOnEveryRank(t *testing.T) {
	cp, _ := testLayout()
	failingCreator := testWorld.Size() - cp // CP-rank 0 of the last group: the only rank that creates its slab
	saved := reserveShm
	reserveShm = func(f *os.File, size int64) error {
		if testWorld.Rank() == failingCreator {
			return syscall.ENOSPC
		}
		return saved(f, size)
	}
	t.Cleanup(func() { reserveShm = saved })

	_, err := runPass(testJob(t), smallOptions())
	var shared *spmd.SharedError
	if !errors.As(err, &shared) {
		t.Fatalf("a full /dev/shm in group %d: %v, want an agreed *spmd.SharedError on every rank", failingCreator/cp, err)
	}
	if speaker := testWorld.Rank() == failingCreator; shared.Speaker != speaker {
		t.Fatalf("speaker %v, want %v (world rank %d creates the failing group's slab)", shared.Speaker, speaker, failingCreator)
	}
	if shared.Speaker {
		msg := err.Error()
		for _, want := range []string{"reserve the", "bytes", shmDir + " has", "free", "no space left on device"} {
			if !strings.Contains(msg, want) {
				t.Errorf("the error %q does not say %q", msg, want)
			}
		}
	}
	if leftover, _ := filepath.Glob(filepath.Join(shmDir, shmNamePrefix+"test-*")); len(leftover) != 0 {
		t.Errorf("segments left behind: %v", leftover)
	}
	if err := testWorld.Barrier(); err != nil { // every rank has checked before any other test creates a segment
		t.Fatal(err)
	}
}
