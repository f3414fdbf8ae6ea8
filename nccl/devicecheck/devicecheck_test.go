//go:build cuda

package devicecheck

import (
	"fmt"
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

// initTimeout bounds the one-rank communicator's init, well inside gpu-check.sh's bound on the
// step.
const initTimeout = 15 * time.Second

// ncclLib is NVIDIA's NCCL, loaded once for the whole binary (TestMain): each load and unload would
// start and stop NCCL's own threads (its RAS thread among them) again, which a process does once in
// cphicache.
var ncclLib *nccl.Library

func TestMain(m *testing.M) {
	lib, err := nccl.Load(os.Getenv("CPHICACHE_NCCL_LIB"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ncclLib = lib
	if strings.HasPrefix(lib.ErrorString(nccl.Success), "ncclshim: ") {
		fmt.Fprintf(
			os.Stderr,
			"%s is ncclshim, which reduces host memory: this check needs NVIDIA's NCCL\n",
			lib.Path(),
		)
		os.Exit(2)
	}
	fmt.Printf(
		"NCCL %s from %s (non-blocking init: %v, PreMulSum: %v)\n",
		nccl.VersionString(lib.Version()),
		lib.Path(),
		lib.HasNonBlockingInit(),
		lib.HasPreMulSum(),
	)
	code := m.Run()
	lib.Close()
	os.Exit(code)
}

// gpu is one rank's NCCL set-up on GPU 0, as the GPU build of hicache makes it: the primary context
// current on a locked thread, a one-rank communicator, a non-blocking stream.
type gpu struct {
	device cu.Device
	comm   *nccl.Comm
	stream cu.Stream
}

// setUp makes the communicator over the library TestMain loaded (gpu-check.sh finds NVIDIA's and
// names it in CPHICACHE_NCCL_LIB). The calling goroutine's thread stays locked until the test ends:
// CUDA contexts are per thread.
func setUp(t testing.TB) *gpu {
	t.Helper()
	lib := ncclLib
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	g := &gpu{}
	var err error
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

// deviceValues allocates device memory holding values. The upload is on the test's stream, so the
// collectives enqueued there after it see the values: a cuMemcpyHtoD would run on the legacy
// default stream, which a non-blocking stream does not wait for.
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

// read copies n values back from the device on the stream, after everything enqueued there, and
// waits for them.
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

// TestOneRankAllReduceWritesTheReceiveBuffer: on one rank MIN is the identity, so the check that
// NCCL moved the bytes on the GPU is that a poisoned receive buffer ends up holding the send
// buffer, unsigned values past int64 included (TestOneRankPreMulSumComputesOnTheDevice checks that
// it computes).
func TestOneRankAllReduceWritesTheReceiveBuffer(t *testing.T) {
	g := setUp(t)
	send := []uint64{7, 1 << 63, math.MaxUint64}
	poison := []uint64{0xdeadbeef, 0xdeadbeef, 0xdeadbeef}
	sendPtr, recvPtr := g.deviceValues(t, send), g.deviceValues(t, poison)
	for _, op := range []nccl.Op{nccl.Min, nccl.Max} {
		if err := g.comm.AllreduceUint64(
			uintptr(sendPtr), uintptr(recvPtr), len(send), op, g.streamHandle(),
		); err != nil {
			t.Fatal(err)
		}
		if got := g.read(t, recvPtr, len(send)); got[0] != send[0] || got[1] != send[1] ||
			got[2] != send[2] {
			t.Errorf("%v on one rank: %v, want %v", op, got, send)
		}
	}
	t.Log(
		"proves: a one-rank communicator made (non-blocking init polled); MIN and MAX wrote the send buffer into a separate, poisoned receive buffer on the stream",
	)
}

// TestOneRankPreMulSumComputesOnTheDevice: NCCL's pre-multiplied sum (x3) from a send buffer into a
// separate receive buffer, checked against the products computed here: on one rank no copy and no
// no-op gives them, so NCCL's reduction kernel ran on the GPU. The send buffer must be left as it
// was.
func TestOneRankPreMulSumComputesOnTheDevice(t *testing.T) {
	g := setUp(t)
	if !ncclLib.HasPreMulSum() {
		t.Fatalf(
			"%s (NCCL %s) has no ncclRedOpCreatePreMulSum (NCCL 2.11+)",
			ncclLib.Path(),
			nccl.VersionString(ncclLib.Version()),
		)
	}
	send := []uint64{1, 7, 1 << 62, math.MaxUint64, 0x0123456789abcdef}
	want := make([]uint64, len(send))
	for i, v := range send {
		want[i] = 3 * v // wrapping, as NCCL's integer arithmetic does
	}
	sendPtr, recvPtr := g.deviceValues(t, send), g.deviceValues(t, make([]uint64, len(send)))
	if err := g.comm.AllreducePreMulSumUint64(
		uintptr(sendPtr), uintptr(recvPtr), len(send), 3, g.streamHandle(),
	); err != nil {
		t.Fatal(err)
	}
	got, kept := g.read(t, recvPtr, len(send)), g.read(t, sendPtr, len(send))
	for i := range want {
		if got[i] != want[i] || kept[i] != send[i] {
			t.Fatalf(
				"PreMulSum x3: element %d = %#x (send now %#x), want %#x (send %#x)",
				i,
				got[i],
				kept[i],
				want[i],
				send[i],
			)
		}
	}
	t.Log(
		"proves: NCCL's reduction kernel computed on the GPU: x3 of 5 uint64 (wrapping) into a separate buffer, checked against host arithmetic",
	)
}

// TestWritingCheckRoundTripInPlace is hicache's writing_check of the GPU build, on one rank: copy
// the frontier in on the stream, all-reduce MIN in place, copy back, synchronise.
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
	t.Log(
		"proves: writing_check's stream order (upload, in-place MIN, download, sync) runs; on one rank MIN changes nothing, so not that it reduces",
	)
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

// BenchmarkWritingCheckRoundTrip measures one GPU-build writing_check on one rank (no network): the
// floor under the writing_check_us the report gives on a node.
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
