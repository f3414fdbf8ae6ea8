//go:build cuda

package devicecheck

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"sync"
	"testing"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/cphicache/cphicache/nccl"
)

// TestTwoRanksOnOneGPUReduceAcrossRanks: with NCCL 2.30 or later and NCCL_MULTI_RANK_GPU_ENABLE=1
// (gpu-check.sh's nccl-2rank step sets it), two ranks of one communicator share GPU 0, one
// goroutine each on a locked thread with the primary context current, as two processes would. Their
// values differ, so the in-place MIN and the x3 pre-multiplied sum give results that neither rank
// holds alone: the multi-rank reduction that a one-rank communicator skips, on the device.
func TestTwoRanksOnOneGPUReduceAcrossRanks(t *testing.T) {
	if os.Getenv(nccl.MultiRankGPUEnv) != "1" || ncclLib.Version() < nccl.MultiRankGPUVersion {
		t.Skipf(
			"needs %s=1 and NCCL 2.30+ (here %q, NCCL %s): gpu-check.sh's nccl-2rank step",
			nccl.MultiRankGPUEnv,
			os.Getenv(nccl.MultiRankGPUEnv),
			nccl.VersionString(ncclLib.Version()),
		)
	}
	id, err := ncclLib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	inputs := [2][]uint64{{5, 1 << 63, 9, 0x0123456789abcdef}, {3, 7, math.MaxUint64, 1}}
	var mins, sums [2][]uint64
	var errs [2]error
	var wg sync.WaitGroup
	for r := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mins[r], sums[r], errs[r] = reduceAsRank(id, r, inputs[r])
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for i := range inputs[0] {
		a, b := inputs[0][i], inputs[1][i]
		wantMin, wantSum := min(a, b), 3*a+3*b // wrapping, as NCCL's integer arithmetic does
		for r := range 2 {
			if mins[r][i] != wantMin || sums[r][i] != wantSum {
				t.Fatalf("rank %d, element %d: MIN %#x, x3 sum %#x; want %#x, %#x",
					r, i, mins[r][i], sums[r][i], wantMin, wantSum)
			}
		}
	}
	t.Logf("proves: two ranks of one NCCL %s communicator on one GPU (%s=1): in-place MIN and x3 "+
		"pre-multiplied sum of %d uint64 across the ranks, each rank holding the other's contribution",
		nccl.VersionString(ncclLib.Version()), nccl.MultiRankGPUEnv, len(inputs[0]))
}

// reduceAsRank is one rank: GPU 0's primary context on this goroutine's locked thread, its own
// stream and buffers, the communicator joined as rank of 2 (it waits for the other rank), MIN in
// place, then the x3 sum into a second buffer.
func reduceAsRank(id nccl.UniqueID, rank int, values []uint64) (mins, sums []uint64, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	device, err := cu.GetDevice(0)
	if err != nil {
		return nil, nil, err
	}
	ctx, err := device.RetainPrimaryCtx()
	if err != nil {
		return nil, nil, err
	}
	defer device.ReleasePrimaryCtx()
	if err := cu.SetCurrentContext(ctx); err != nil {
		return nil, nil, err
	}
	stream, err := cu.MakeStream(cu.NonBlocking)
	if err != nil {
		return nil, nil, err
	}
	defer stream.Destroy()
	bytes := int64(len(values)) * 8
	buf, err := cu.MemAlloc(2 * bytes)
	if err != nil {
		return nil, nil, err
	}
	defer cu.MemFree(buf)
	comm, err := ncclLib.InitRankWithin(id, 2, rank, initTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("joining the two-rank communicator: %w", err)
	}
	defer comm.Destroy()
	s := uintptr(unsafe.Pointer(stream.C()))
	mins, sums = make([]uint64, len(values)), make([]uint64, len(values))
	steps := []func() error{
		func() error { return cu.MemcpyHtoDAsync(buf, unsafe.Pointer(&values[0]), bytes, stream) },
		func() error { return comm.AllreduceUint64(uintptr(buf), uintptr(buf), len(values), nccl.Min, s) },
		func() error { return cu.MemcpyDtoHAsync(unsafe.Pointer(&mins[0]), buf, bytes, stream) },
		func() error { return cu.MemcpyHtoDAsync(buf, unsafe.Pointer(&values[0]), bytes, stream) },
		func() error {
			return comm.AllreducePreMulSumUint64(
				uintptr(buf),
				uintptr(buf)+uintptr(bytes),
				len(values),
				3,
				s,
			)
		},
		func() error {
			return cu.MemcpyDtoHAsync(
				unsafe.Pointer(&sums[0]),
				buf+cu.DevicePtr(bytes),
				bytes,
				stream,
			)
		},
		stream.Synchronize,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, nil, err
		}
	}
	return mins, sums, nil
}
