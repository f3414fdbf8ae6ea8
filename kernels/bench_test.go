package kernels

import (
	"fmt"
	"testing"
)

// benchTotalBytes is what one benchmark operation copies: large enough that per-call overheads are small,
// small enough for a shared 2-core machine.
const benchTotalBytes = 32 << 20

var benchPartBytes = []int64{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20}

// benchGeometry is one object of benchTotalBytes on one rank (4 layers x K and V), placed from the middle of
// slab 0 into slab 1 as the allocator would: in layer_first it coalesces to 16 copies, in page_first it stays one
// copy per page part.
func benchGeometry(partBytes, totalBytes int64, pageFirst bool) (testGeometry, []Span) {
	g := testGeometry{ranks: 1, layers: 4, payloads: 2, slabs: 2, partBytes: partBytes, pageFirst: pageFirst}
	pages := int(totalBytes / (int64(g.layers*g.payloads) * partBytes))
	g.devicePages, g.slotsPerSlab = pages, pages
	return g, g.spansFor(0, g.objectPlacements(0, pages, 0, pages/2))
}

func benchName(g testGeometry) string {
	layout := "layer_first"
	if g.pageFirst {
		layout = "page_first"
	}
	return fmt.Sprintf("%s/part=%dKiB", layout, g.partBytes>>10)
}

// benchmarkEngine measures Gather (or Scatter) of one object in every layout and part size on the engine that
// newEngine builds.
func benchmarkEngine(b *testing.B, totalBytes int64, gather bool, newEngine func(testing.TB, int64, [][]byte) Engine) {
	for _, pageFirst := range []bool{false, true} {
		for _, partBytes := range benchPartBytes {
			g, spans := benchGeometry(partBytes, totalBytes, pageFirst)
			b.Run(benchName(g), func(b *testing.B) {
				e := newEngine(b, g.deviceBytes(), g.newSlabs(0))
				op := e.Scatter
				if gather {
					op = e.Gather
				}
				b.SetBytes(totalBytes)
				for b.Loop() {
					if err := op(spans); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

func newBenchHostEngine(tb testing.TB, deviceBytes int64, slabs [][]byte) Engine {
	e, err := NewHostEngine(deviceBytes, slabs, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

func BenchmarkHostGather(b *testing.B) { benchmarkEngine(b, benchTotalBytes, true, newBenchHostEngine) }

func BenchmarkHostScatter(b *testing.B) {
	benchmarkEngine(b, benchTotalBytes, false, newBenchHostEngine)
}

// BenchmarkCopyReference is the yardstick: one copy() (memmove) of the same total bytes in one call.
func BenchmarkCopyReference(b *testing.B) {
	src, dst := make([]byte, benchTotalBytes), make([]byte, benchTotalBytes)
	b.SetBytes(benchTotalBytes)
	for b.Loop() {
		copy(dst, src)
	}
}
