//go:build cuda

package devicecheck

import (
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/cphicache/cphicache/nccl"
)

// initTimeout bounds the one-rank communicator's init, well inside gpu-check.sh's bound on the step.
const initTimeout = 15 * time.Second

// gpu is one rank's NCCL set-up on GPU 0, as the GPU build of hicache makes it: the primary context current on a
// locked thread, a one-rank communicator, a non-blocking stream.
type gpu struct {
	device cu.Device
	comm   *nccl.Comm
	stream cu.Stream
}

// setUp loads the library named by CPHICACHE_NCCL_LIB (gpu-check.sh finds NVIDIA's) and makes the communicator.
// The calling goroutine's thread stays locked until the test ends: CUDA contexts are per thread.
func setUp(t testing.TB) *gpu {
	t.Helper()
	lib, err := nccl.Load(os.Getenv("CPHICACHE_NCCL_LIB"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(lib.Close)
	if strings.HasPrefix(lib.ErrorString(nccl.Success), "ncclshim: ") {
		t.Fatalf("%s is ncclshim, which reduces host memory: this check needs NVIDIA's NCCL", lib.Path())
	}
	t.Logf("NCCL %s from %s (non-blocking init: %v)", nccl.VersionString(lib.Version()), lib.Path(), lib.HasNonBlockingInit())
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	g := &gpu{}
	if g.device, err = cu.GetDevice(0); err != nil {
		t.Fatal(err)
	}
	ctx, err := g.device.RetainPrimaryCtx()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.device.ReleasePrimaryCtx() })
	if err := cu.SetCurrentContext(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := lib.UniqueID()
	if err != nil {
		t.Fatal(err)
	}
	// As hicache makes it: non-blocking where NCCL has it (2.14+), polled under a bound.
	if g.comm, err = lib.InitRankWithin(id, 1, 0, initTimeout); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.comm.Destroy(); err != nil {
			t.Error(err)
		}
	})
	if g.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.stream.Destroy() })
	return g
}

func (g *gpu) streamHandle() uintptr { return uintptr(unsafe.Pointer(g.stream.C())) }

// deviceValues allocates device memory holding values. The upload is on the test's stream, so the collectives
// enqueued there after it see the values: a cuMemcpyHtoD would run on the legacy default stream, which a
// non-blocking stream does not wait for.
func (g *gpu) deviceValues(t testing.TB, values []uint64) cu.DevicePtr {
	t.Helper()
	p, err := cu.MemAlloc(int64(len(values)) * 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cu.MemFree(p) })
	if err := cu.MemcpyHtoDAsync(p, unsafe.Pointer(&values[0]), int64(len(values))*8, g.stream); err != nil {
		t.Fatal(err)
	}
	if err := g.stream.Synchronize(); err != nil {
		t.Fatal(err)
	}
	return p
}

// read copies n values back from the device on the stream, after everything enqueued there, and waits for them.
func (g *gpu) read(t testing.TB, p cu.DevicePtr, n int) []uint64 {
	t.Helper()
	out := make([]uint64, n)
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&out[0]), p, int64(n)*8, g.stream); err != nil {
		t.Fatal(err)
	}
	if err := g.stream.Synchronize(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOneRankAllReduceWritesTheReceiveBuffer: on one rank MIN is the identity, so the check that NCCL really
// ran on the GPU is that a poisoned receive buffer ends up holding the send buffer, unsigned values past int64
// included.
func TestOneRankAllReduceWritesTheReceiveBuffer(t *testing.T) {
	g := setUp(t)
	send := []uint64{7, 1 << 63, math.MaxUint64}
	poison := []uint64{0xdeadbeef, 0xdeadbeef, 0xdeadbeef}
	sendPtr, recvPtr := g.deviceValues(t, send), g.deviceValues(t, poison)
	for _, op := range []nccl.Op{nccl.Min, nccl.Max} {
		if err := g.comm.AllreduceUint64(uintptr(sendPtr), uintptr(recvPtr), len(send), op, g.streamHandle()); err != nil {
			t.Fatal(err)
		}
		if got := g.read(t, recvPtr, len(send)); got[0] != send[0] || got[1] != send[1] || got[2] != send[2] {
			t.Errorf("%v on one rank: %v, want %v", op, got, send)
		}
	}
}

// TestWritingCheckRoundTripInPlace is hicache's writing_check of the GPU build, on one rank: copy the frontier
// in on the stream, all-reduce MIN in place, copy back, synchronise.
func TestWritingCheckRoundTripInPlace(t *testing.T) {
	g := setUp(t)
	p := g.deviceValues(t, []uint64{0})
	frontier := []uint64{12345}
	if err := writingCheck(g, p, frontier); err != nil {
		t.Fatal(err)
	}
	if frontier[0] != 12345 {
		t.Errorf("in-place MIN on one rank = %d, want 12345", frontier[0])
	}
}

func writingCheck(g *gpu, p cu.DevicePtr, frontier []uint64) error {
	host := unsafe.Pointer(&frontier[0])
	if err := cu.MemcpyHtoDAsync(p, host, 8, g.stream); err != nil {
		return err
	}
	if err := g.comm.AllreduceUint64(uintptr(p), uintptr(p), 1, nccl.Min, g.streamHandle()); err != nil {
		return err
	}
	if err := cu.MemcpyDtoHAsync(host, p, 8, g.stream); err != nil {
		return err
	}
	return g.stream.Synchronize()
}

// BenchmarkWritingCheckRoundTrip measures one GPU-build writing_check on one rank (no network): the floor under
// the writing_check_us the report gives on a node.
func BenchmarkWritingCheckRoundTrip(b *testing.B) {
	g := setUp(b)
	p := g.deviceValues(b, []uint64{0})
	frontier := []uint64{1}
	for b.Loop() {
		if err := writingCheck(g, p, frontier); err != nil {
			b.Fatal(err)
		}
	}
}
