//go:build cuda

package kernels

// These tests need a GPU: they are compiled by make test-cuda-build and run by kernels/gpu-check.sh on a GPU
// machine. The shared checks of host_test.go run unchanged on the CUDA engine, so both engines pass the same
// byte-for-byte verification.

import (
	"math/rand/v2"
	"syscall"
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

func newTestCUDAEngine(t *testing.T, deviceBytes int64, slabs [][]byte) Engine {
	t.Helper()
	return newBenchCUDAEngine(t, deviceBytes, slabs)
}

func newBenchCUDAEngine(tb testing.TB, deviceBytes int64, slabs [][]byte) Engine {
	tb.Helper()
	e, err := NewCUDAEngine(deviceBytes, slabs)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := e.Close(); err != nil {
			tb.Error(err)
		}
	})
	return e
}

// mmapSlabs allocates slabs as the shared L2 is: page-aligned memory outside the Go heap.
func mmapSlabs(tb testing.TB, count int, slabBytes int64) [][]byte {
	tb.Helper()
	slabs := make([][]byte, count)
	for i := range slabs {
		b, err := syscall.Mmap(-1, 0, int(slabBytes), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_SHARED)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { syscall.Munmap(b) })
		slabs[i] = b
	}
	return slabs
}

// cudaGeometries add to the CPU ones parts of typical KV sizes (64 KiB and 1 MiB) and an odd part size, which
// takes the kernel's byte-copy path.
var cudaGeometries = append(append([]testGeometry(nil), roundTripGeometries...),
	testGeometry{ranks: 4, layers: 4, payloads: 2, devicePages: 64, slotsPerSlab: 24, slabs: 3, partBytes: 64 << 10},
	testGeometry{ranks: 4, layers: 4, payloads: 2, devicePages: 64, slotsPerSlab: 24, slabs: 3, partBytes: 64 << 10, pageFirst: true},
	testGeometry{ranks: 2, layers: 2, payloads: 1, devicePages: 24, slotsPerSlab: 16, slabs: 2, partBytes: 1 << 20},
	testGeometry{ranks: 2, layers: 3, payloads: 2, devicePages: 32, slotsPerSlab: 20, slabs: 2, partBytes: 1000, pageFirst: true},
)

func TestCUDAGatherScatterRoundTrip(t *testing.T) {
	checkGatherScatterRoundTrip(t, newTestCUDAEngine, cudaGeometries, 8)
}

func TestCUDABoundsErrorCopiesNothing(t *testing.T) {
	checkBoundsErrorCopiesNothing(t, newTestCUDAEngine)
}

func TestCUDAZeroLengthEdgeCases(t *testing.T) { checkZeroLengthEdgeCases(t, newTestCUDAEngine) }

// TestCUDAMmapSlabsAcrossRegistrationChunks registers slabs larger than one registration chunk and copies
// spans that cross a chunk boundary, which the engine must split.
func TestCUDAMmapSlabsAcrossRegistrationChunks(t *testing.T) {
	const slabBytes = cudaRegisterChunkBytes + 8<<20
	slabs := mmapSlabs(t, 2, slabBytes)
	e := newTestCUDAEngine(t, 16<<20, slabs)
	rng := rand.New(rand.NewPCG(7, 7))
	content := randomBytes(rng, 16<<20)
	mustOK(t, e.WriteDevice(0, content))
	spans := []Span{
		{DeviceOffsetBytes: 0, Slab: 0, SlabOffsetBytes: cudaRegisterChunkBytes - 3<<20, Bytes: 8 << 20},
		{DeviceOffsetBytes: 8 << 20, Slab: 1, SlabOffsetBytes: slabBytes - 8<<20, Bytes: 8 << 20},
	}
	mustOK(t, e.Gather(spans))
	want := make([][]byte, 2)
	want[0] = slabs[0][cudaRegisterChunkBytes-3<<20 : cudaRegisterChunkBytes+5<<20]
	want[1] = slabs[1][slabBytes-8<<20:]
	if j := firstDiff(append(append([]byte(nil), want[0]...), want[1]...), content); j >= 0 {
		t.Fatalf("Gather across a registration chunk: byte %d differs", j)
	}
	mustOK(t, e.WriteDevice(0, make([]byte, 16<<20)))
	mustOK(t, e.Scatter(spans))
	got := make([]byte, 16<<20)
	mustOK(t, e.ReadDevice(0, got))
	if j := firstDiff(got, content); j >= 0 {
		t.Fatalf("Scatter across a registration chunk: byte %d differs", j)
	}
}

func TestCUDAConcurrentCallsAreSafe(t *testing.T) {
	const callers, partBytes, rounds = 4, 96 << 10, 5
	slabs := mmapSlabs(t, 1, callers*2*partBytes)
	e := newTestCUDAEngine(t, callers*2*partBytes, slabs)
	errs := make(chan error, callers)
	for c := range callers {
		go func() { errs <- concurrentCaller(e, c, partBytes, rounds) }()
	}
	for range callers {
		mustOK(t, <-errs)
	}
}

// cudaBenchTotalBytes is one operation of the GPU benchmarks: long enough (several ms at tens of GB/s) that
// launch and synchronization costs are small.
const cudaBenchTotalBytes = 256 << 20

func newBenchCUDAEngineMmap(tb testing.TB, deviceBytes int64, slabs [][]byte) Engine {
	return newBenchCUDAEngine(tb, deviceBytes, mmapSlabs(tb, len(slabs), int64(len(slabs[0]))))
}

func BenchmarkCUDAGather(b *testing.B) {
	benchmarkEngine(b, cudaBenchTotalBytes, true, newBenchCUDAEngineMmap)
}

func BenchmarkCUDAScatter(b *testing.B) {
	benchmarkEngine(b, cudaBenchTotalBytes, false, newBenchCUDAEngineMmap)
}

// BenchmarkCUDAMemcpyReference is the yardstick beside our kernel: cuMemcpyDtoH and cuMemcpyHtoD (the copy
// engines' DMA) of the same total bytes in one call, between the device buffer and registered (pinned) slab
// memory.
func BenchmarkCUDAMemcpyReference(b *testing.B) {
	slabs := mmapSlabs(b, 1, cudaBenchTotalBytes)
	e := newBenchCUDAEngine(b, cudaBenchTotalBytes, slabs).(*CUDAEngine)
	host := unsafe.Pointer(&slabs[0][0])
	for _, dir := range []string{"DtoH", "HtoD"} {
		b.Run(dir, func(b *testing.B) {
			b.SetBytes(cudaBenchTotalBytes)
			for b.Loop() {
				err := e.locked(func() error {
					if dir == "DtoH" {
						return cu.MemcpyDtoH(host, e.devicePtr, cudaBenchTotalBytes)
					}
					return cu.MemcpyHtoD(e.devicePtr, host, cudaBenchTotalBytes)
				})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
