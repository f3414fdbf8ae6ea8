package shm

import (
	"errors"
	"os"
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
