package kernels

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// benchTotalBytes is what one benchmark operation copies: large enough that per-call overheads are
// small, small enough for a shared 2-core machine.
const benchTotalBytes = 32 << 20

var benchPartBytes = []int64{4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20}

// benchGeometry is one object of benchTotalBytes on one rank (4 layers x K and V), placed from the
// middle of slab 0 into slab 1 as the allocator would: in layer_first it coalesces to 16 copies, in
// page_first it stays one copy per page part.
func benchGeometry(partBytes, totalBytes int64, pageFirst bool) (testGeometry, []Span) {
	g := testGeometry{
		ranks:     1,
		layers:    4,
		payloads:  2,
		slabs:     2,
		partBytes: partBytes,
		pageFirst: pageFirst,
	}
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

// benchSetup builds an engine for g and returns it with the slabs it copies to and from.
type benchSetup func(tb testing.TB, g testGeometry) (Engine, [][]byte)

// benchmarkEngine measures Gather (or Scatter) of one object in every layout and each of partSizes
// on the engine that setUp builds. Each shape's bytes are verified once, before the timed loop: a
// fast wrong copy is no result.
func benchmarkEngine(
	b *testing.B,
	totalBytes int64,
	partSizes []int64,
	gather bool,
	setUp benchSetup,
) {
	for _, pageFirst := range []bool{false, true} {
		for _, partBytes := range partSizes {
			g, spans := benchGeometry(partBytes, totalBytes, pageFirst)
			b.Run(benchName(g), func(b *testing.B) {
				e, slabs := setUp(b, g)
				op := e.Scatter
				if gather {
					op = e.Gather
				}
				if err := verifyBenchCopy(e, slabs, spans, gather); err != nil {
					b.Fatalf("%d spans: %v", len(spans), err)
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

// verifyBenchCopy fills the source side (device buffer or slabs) with a pattern, runs the copy once
// and checks every span's destination bytes against its source. Spans must not overlap at their
// destinations.
func verifyBenchCopy(e Engine, slabs [][]byte, spans []Span, gather bool) error {
	device := benchPattern(e.DeviceBytes(), 1)
	for i, slab := range slabs {
		copy(slab, benchPattern(int64(len(slab)), uint64(i)+2))
	}
	if err := e.WriteDevice(0, device); err != nil {
		return err
	}
	var err error
	if gather {
		err = e.Gather(spans)
	} else {
		err = e.Scatter(spans)
	}
	if err != nil {
		return err
	}
	if !gather {
		if err := e.ReadDevice(0, device); err != nil {
			return err
		}
	}
	for i, s := range spans {
		onDevice := device[s.DeviceOffsetBytes : s.DeviceOffsetBytes+s.Bytes]
		inSlab := slabs[s.Slab][s.SlabOffsetBytes : s.SlabOffsetBytes+s.Bytes]
		if !bytes.Equal(onDevice, inSlab) {
			return fmt.Errorf(
				"span %d (%+v): destination bytes differ from the source after one copy",
				i,
				s,
			)
		}
	}
	return nil
}

// benchPattern is n bytes of distinct 8-byte words, seeded so that the device buffer and each slab
// differ: cheaper than random bytes at hundreds of MiB, and no two parts alike.
func benchPattern(n int64, seed uint64) []byte {
	b := make([]byte, n)
	for i := int64(0); i+8 <= n; i += 8 {
		binary.LittleEndian.PutUint64(b[i:], (uint64(i)+seed<<56)*0x9e3779b97f4a7c15)
	}
	return b
}

func newBenchHostEngine(tb testing.TB, deviceBytes int64, slabs [][]byte) Engine {
	e, err := NewHostEngine(deviceBytes, slabs, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.Close() })
	return e
}

func benchHost(tb testing.TB, g testGeometry) (Engine, [][]byte) {
	slabs := g.newSlabs(0)
	return newBenchHostEngine(tb, g.deviceBytes(), slabs), slabs
}

func BenchmarkHostGather(b *testing.B) {
	benchmarkEngine(b, benchTotalBytes, benchPartBytes, true, benchHost)
}

func BenchmarkHostScatter(b *testing.B) {
	benchmarkEngine(b, benchTotalBytes, benchPartBytes, false, benchHost)
}

// BenchmarkCopyReference is the yardstick: one copy() (memmove) of the same total bytes in one
// call.
func BenchmarkCopyReference(b *testing.B) {
	src, dst := make([]byte, benchTotalBytes), make([]byte, benchTotalBytes)
	b.SetBytes(benchTotalBytes)
	for b.Loop() {
		copy(dst, src)
	}
}
