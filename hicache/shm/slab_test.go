package shm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestFallocateReservesAndRefusesWhatShmLacks runs the real reservation on a scratch file in /dev/shm (named
// outside the cphicache- prefix, so that no leak check mistakes it for a segment): a small one must be backed
// by memory at once, and one larger than /dev/shm's free space must fail with ENOSPC, not succeed sparsely.
func TestFallocateReservesAndRefusesWhatShmLacks(t *testing.T) {
	free, err := FreeBytes()
	if err != nil || free <= 0 {
		t.Skipf("/dev/shm reports no size limit (%d bytes free, %v): tmpfs would try to back any size", free, err)
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
		t.Fatalf("after reserving %d bytes: size %d, %d bytes allocated", small, st.Size, st.Blocks*512)
	}
	if err := Fallocate(f, free+1<<30); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("reserving %d bytes with %d free: %v, want ENOSPC", free+1<<30, free, err)
	}
}

// TestJobSegmentsListsOnlyThatJobs plants segment names of two jobs whose ids share a prefix, and a name that
// only starts like a segment: each job's listing must hold its own name and nothing else, so that a leak check
// on a node shared with other cphicache jobs does not fail on their live segments.
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
