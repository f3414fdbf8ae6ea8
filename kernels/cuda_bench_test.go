//go:build cuda

package kernels

import (
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// benchCUDA builds a CUDA engine over mmap'ed slabs, as the shared L2 is.
func benchCUDA(tb testing.TB, g testGeometry) (Engine, [][]byte) {
	slabs := mmapSlabs(tb, g.slabs, g.slabBytes())
	return newBenchCUDAEngine(tb, g.deviceBytes(), slabs), slabs
}

func BenchmarkCUDAGather(b *testing.B) {
	benchmarkEngine(b, cudaBenchTotalBytes, cudaBenchPartBytes, true, benchCUDA)
}

func BenchmarkCUDAScatter(b *testing.B) {
	benchmarkEngine(b, cudaBenchTotalBytes, cudaBenchPartBytes, false, benchCUDA)
}

// BenchmarkCUDAMemcpyReference is the yardstick beside our kernel: cuMemcpyDtoH and cuMemcpyHtoD
// (the copy engines' DMA) of the same total bytes in one call, between the device buffer and
// registered (pinned) slab memory.
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
