package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// TestFallocateReservesAndRefusesWhatShmLacks runs the real reservation on a scratch file in
// /dev/shm (named outside the cphicache- prefix, so that no leak check mistakes it for a segment):
// a small one must be backed by memory at once, and one larger than /dev/shm must fail with ENOSPC,
// not succeed sparsely. Larger than the whole of /dev/shm, not only its free space: tmpfs refuses
// that before it allocates a page, where a request between the two fills the free space first (on
// this machine 22 GB of its 23 GB of memory for 19 s, beside the rest of the suite, whose segments
// came and went meanwhile: once it even succeeded).
func TestFallocateReservesAndRefusesWhatShmLacks(t *testing.T) {
	free, err := FreeBytes()
	if err != nil || free <= 0 {
		t.Skipf(
			"/dev/shm reports no size limit (%d bytes free, %v): tmpfs would try to back any size",
			free,
			err,
		)
	}
	f, err := os.CreateTemp(Dir, "cphitest-reserve-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close(); os.Remove(f.Name()) })
	const small = 1 << 20
	if err := Fallocate(f, small); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	if st.Size != small || st.Blocks*512 < small {
		t.Fatalf(
			"after reserving %d bytes: size %d, %d bytes allocated",
			small,
			st.Size,
			st.Blocks*512,
		)
	}
	var fs syscall.Statfs_t
	if err := syscall.Statfs(Dir, &fs); err != nil {
		t.Fatal(err)
	}
	size := int64(fs.Blocks) * fs.Bsize
	if err := Fallocate(f, size+1<<30); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("reserving %d bytes of a %d-byte %s: %v, want ENOSPC", size+1<<30, size, Dir, err)
	}
}

// TestJobSegmentsListsOnlyThatJobs plants segment names of two jobs whose ids share a prefix, and a
// name that only starts like a segment: each job's listing must hold its own name and nothing else,
// so that a leak check on a node shared with other cphicache jobs does not fail on their live
// segments.
func TestJobSegmentsListsOnlyThatJobs(t *testing.T) {
	mine, other := fmt.Sprintf("shmtest%d", os.Getpid()), fmt.Sprintf("shmtest%d-2", os.Getpid())
	names := map[string]string{
		mine:  SegmentPrefix(mine) + "g0-0123456789abcdef",
		other: SegmentPrefix(other) + "g12-fedcba9876543210",
		"":    SegmentPrefix(mine) + "g0-not-a-nonce",
	}
	for _, name := range names {
		path := filepath.Join(Dir, name)
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
	}
	for _, job := range []string{mine, other} {
		got, err := JobSegments(job)
		if err != nil || len(got) != 1 || got[0] != names[job] {
			t.Errorf("JobSegments(%q) = %v, %v; want only [%s]", job, got, err, names[job])
		}
	}
}

// TestASignalWhileTheSegmentIsMadeRemovesIt: the clean-up that the signal handler and the watchdog
// run before they end the process must remove a segment still being made: here it runs in the
// middle of the reservation, as a SIGTERM then does, and the segment must be gone; after the
// clean-up, no segment is made at all; after a whole creation, forget leaves it to the caller.
func TestASignalWhileTheSegmentIsMadeRemovesIt(t *testing.T) {
	var cleanup spmd.Cleanup
	seg := Segment{
		JobID: fmt.Sprintf("shmtest%d", os.Getpid()),
		Reserve: func(f *os.File, bytes int64) error {
			// what handleSignals does before os.Exit, arriving while the segment is reserved
			cleanup.Run()
			return Fallocate(f, bytes)
		},
	}
	name, forget, err := createSegment(seg, 1<<20, &cleanup)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(Dir, name)
	t.Cleanup(func() { os.Remove(path) })
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the clean-up run during the reservation left %s behind (stat: %v)", path, err)
	}
	forget()
	// After the clean-up (the signal came just before the segment), the process is ending: nothing
	// is made.
	if name, _, err := createSegment(Segment{JobID: seg.JobID}, 1<<20, &cleanup); !errors.Is(
		err,
		spmd.ErrEnding,
	) {
		if name != "" {
			os.Remove(filepath.Join(Dir, name))
		}
		t.Fatalf("a segment made after the clean-up ran: %q, %v; want spmd.ErrEnding", name, err)
	}

	var kept spmd.Cleanup
	name, forget, err = createSegment(Segment{JobID: seg.JobID}, 1<<20, &kept)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(Dir, name)
	t.Cleanup(func() { os.Remove(path) })
	forget() // as OpenSharedSlab's unlink does: from here the caller owns the name
	kept.Run()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("a clean-up after forget removed the segment it no longer owns: %v", err)
	}
}
