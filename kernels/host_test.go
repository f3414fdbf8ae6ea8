package kernels

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
)

// engineFactory builds the engine under test; the CPU tests use newTestHostEngine, the cuda tests
// reuse the same checks with the CUDA engine.
type engineFactory func(t *testing.T, deviceBytes int64, slabs [][]byte) Engine

func newTestHostEngine(t *testing.T, deviceBytes int64, slabs [][]byte) Engine {
	t.Helper()
	// 3 workers on a 2-core machine: more workers than cores, so that chunks really interleave.
	e, err := NewHostEngine(deviceBytes, slabs, 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// roundTripGeometries are both layouts, several slabs, parts small (many spans) and large enough (a
// few MiB per call) that a call is split between workers.
var roundTripGeometries = []testGeometry{
	{ranks: 2, layers: 3, payloads: 2, devicePages: 64, slotsPerSlab: 40, slabs: 3, partBytes: 48},
	{
		ranks:        2,
		layers:       3,
		payloads:     2,
		devicePages:  64,
		slotsPerSlab: 40,
		slabs:        3,
		partBytes:    48,
		pageFirst:    true,
	},
	{
		ranks:        4,
		layers:       2,
		payloads:     1,
		devicePages:  96,
		slotsPerSlab: 64,
		slabs:        2,
		partBytes:    16 << 10,
	},
	{
		ranks:        4,
		layers:       2,
		payloads:     1,
		devicePages:  96,
		slotsPerSlab: 64,
		slabs:        2,
		partBytes:    16 << 10,
		pageFirst:    true,
	},
}

func TestHostGatherScatterRoundTrip(t *testing.T) {
	checkGatherScatterRoundTrip(t, newTestHostEngine, roundTripGeometries, 12)
}

// checkGatherScatterRoundTrip gathers random device content into zeroed slabs, checks the slabs
// byte for byte against the model, scatters it back into a zeroed device buffer and checks that
// too, for many span lists: runs of consecutive pages (objects) and random placements, as rank 1 of
// the group.
func checkGatherScatterRoundTrip(
	t *testing.T,
	newEngine engineFactory,
	geometries []testGeometry,
	lists int,
) {
	for _, g := range geometries {
		t.Run(g.String(), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(g.partBytes), uint64(g.slabs)))
			for list := range lists {
				var places []placement
				if list%2 == 0 {
					pages := 1 + rng.IntN(g.devicePages)
					first := rng.IntN(g.devicePages - pages + 1)
					places = g.objectPlacements(
						first,
						pages,
						rng.IntN(g.slabs),
						rng.IntN(g.slotsPerSlab),
					)
				} else {
					places = g.randomPlacements(rng, 1+rng.IntN(g.devicePages))
				}
				checkRoundTrip(t, newEngine, g, g.spansFor(1, places), rng)
			}
		})
	}
}

func checkRoundTrip(
	t *testing.T,
	newEngine engineFactory,
	g testGeometry,
	spans []Span,
	rng *rand.Rand,
) {
	t.Helper()
	content := randomBytes(rng, g.deviceBytes())
	slabs, wantSlabs := g.newSlabs(0), g.newSlabs(0)
	modelCopy(content, wantSlabs, spans, true)

	e := newEngine(t, g.deviceBytes(), slabs)
	mustOK(t, e.WriteDevice(0, content))
	callerSpans := append([]Span(nil), spans...)
	mustOK(t, e.Gather(spans))
	for i := range slabs {
		if j := firstDiff(slabs[i], wantSlabs[i]); j >= 0 {
			t.Fatalf(
				"%d spans: after Gather, slab %d differs from the model at byte %d",
				len(spans),
				i,
				j,
			)
		}
	}
	if j := firstSpanDiff(spans, callerSpans); j >= 0 {
		t.Fatalf("Gather changed the caller's span %d", j)
	}

	mustOK(t, e.WriteDevice(0, make([]byte, g.deviceBytes())))
	mustOK(t, e.Scatter(spans))
	got := make([]byte, g.deviceBytes())
	mustOK(t, e.ReadDevice(0, got))
	want := make([]byte, g.deviceBytes())
	modelCopy(want, wantSlabs, spans, false)
	if j := firstDiff(got, want); j >= 0 {
		t.Fatalf(
			"%d spans: after Scatter, the device buffer differs from the model at byte %d",
			len(spans),
			j,
		)
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func firstDiff(a, b []byte) int {
	if bytes.Equal(a, b) {
		return -1
	}
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func firstSpanDiff(a, b []Span) int {
	for i := range a {
		if a[i] != b[i] {
			return i
		}
	}
	return -1
}

func TestHostBoundsErrorCopiesNothing(t *testing.T) {
	checkBoundsErrorCopiesNothing(t, newTestHostEngine)
}

// checkBoundsErrorCopiesNothing gives span lists whose last span is out of bounds, and checks the
// error names it and that neither side was written.
func checkBoundsErrorCopiesNothing(t *testing.T, newEngine engineFactory) {
	slabs := [][]byte{bytes.Repeat([]byte{7}, 4096), bytes.Repeat([]byte{7}, 1024)}
	e := newEngine(t, 8192, slabs)
	mustOK(t, e.WriteDevice(0, bytes.Repeat([]byte{9}, 8192)))
	good := Span{DeviceOffsetBytes: 0, Slab: 0, SlabOffsetBytes: 0, Bytes: 512}
	for _, bad := range []Span{
		{DeviceOffsetBytes: 8000, Slab: 1, Bytes: 512},
		{DeviceOffsetBytes: 0, Slab: 1, SlabOffsetBytes: 1000, Bytes: 32},
		{Slab: 2, Bytes: 16},
		{Bytes: -16},
	} {
		for _, op := range []func([]Span) error{e.Gather, e.Scatter} {
			err := op([]Span{good, bad})
			var spanErr *SpanError
			if !errors.As(err, &spanErr) || spanErr.Index != 1 {
				t.Fatalf("span %+v: got %v, want a SpanError naming span 1", bad, err)
			}
		}
	}
	device := make([]byte, 8192)
	mustOK(t, e.ReadDevice(0, device))
	if !bytes.Equal(device, bytes.Repeat([]byte{9}, 8192)) ||
		!bytes.Equal(slabs[0], bytes.Repeat([]byte{7}, 4096)) {
		t.Fatal("a rejected span list wrote bytes")
	}
	if err := e.WriteDevice(8000, make([]byte, 193)); err == nil {
		t.Fatal("WriteDevice past the end: got nil error")
	}
	if err := e.ReadDevice(-1, make([]byte, 1)); err == nil {
		t.Fatal("ReadDevice at -1: got nil error")
	}
}

func TestHostZeroLengthEdgeCases(t *testing.T) {
	checkZeroLengthEdgeCases(t, newTestHostEngine)
}

func checkZeroLengthEdgeCases(t *testing.T, newEngine engineFactory) {
	slabs := [][]byte{make([]byte, 64), {}}
	e := newEngine(t, 64, slabs)
	for name, spans := range map[string][]Span{
		"nil":                    nil,
		"empty":                  {},
		"zero bytes":             {{Bytes: 0}},
		"zero bytes at the ends": {{DeviceOffsetBytes: 64, SlabOffsetBytes: 64}, {Slab: 1}},
	} {
		if err := e.Gather(spans); err != nil {
			t.Errorf("Gather(%s): %v", name, err)
		}
		if err := e.Scatter(spans); err != nil {
			t.Errorf("Scatter(%s): %v", name, err)
		}
	}
	if err := e.Gather([]Span{{Slab: 1, Bytes: 1}}); err == nil {
		t.Error("one byte into an empty slab: got nil error")
	}
	mustOK(t, e.WriteDevice(64, nil))
	mustOK(t, e.ReadDevice(64, nil))
	empty := newEngine(t, 0, [][]byte{{}})
	mustOK(t, empty.Gather([]Span{{}}))
	if err := empty.Gather([]Span{{Slab: 1}}); err == nil {
		t.Error("zero bytes, but into a slab that does not exist: got nil error")
	}
	if empty.DeviceBytes() != 0 {
		t.Fatalf("DeviceBytes = %d, want 0", empty.DeviceBytes())
	}
}

// TestHostConcurrentCallsAreSafe runs Gathers and Scatters on disjoint regions from several
// goroutines at once (run under -race by make test-kernels-race); each goroutine checks its own
// bytes.
func TestHostConcurrentCallsAreSafe(t *testing.T) {
	// 96 KiB parts: each call is split between workers
	const callers, partBytes, rounds = 4, 96 << 10, 5
	slabs := [][]byte{make([]byte, callers*2*partBytes)}
	e := newTestHostEngine(t, callers*2*partBytes, slabs)
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for c := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- concurrentCaller(e, c, partBytes, rounds)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(t, err)
	}
}

// concurrentCaller owns device and slab bytes [2c, 2c+2) parts, and round-trips them through the
// slab crossed.
func concurrentCaller(e Engine, c int, partBytes int64, rounds int) error {
	base := int64(2*c) * partBytes
	spans := []Span{
		{DeviceOffsetBytes: base, SlabOffsetBytes: base + partBytes, Bytes: partBytes},
		{DeviceOffsetBytes: base + partBytes, SlabOffsetBytes: base, Bytes: partBytes},
	}
	want := bytes.Repeat([]byte{byte(c + 1)}, int(2*partBytes))
	got := make([]byte, 2*partBytes)
	for r := range rounds {
		want[r] = byte(r)
		if err := e.WriteDevice(base, want); err != nil {
			return err
		}
		if err := e.Gather(spans); err != nil {
			return err
		}
		if err := e.WriteDevice(base, make([]byte, 2*partBytes)); err != nil {
			return err
		}
		if err := e.Scatter(spans); err != nil {
			return err
		}
		if err := e.ReadDevice(base, got); err != nil {
			return err
		}
		if j := firstDiff(got, want); j >= 0 {
			return errors.New("concurrent round trip lost bytes")
		}
	}
	return nil
}

func TestHostCloseThenCallFails(t *testing.T) {
	e, err := NewHostEngine(64, [][]byte{make([]byte, 64)}, 2)
	mustOK(t, err)
	mustOK(t, e.Close())
	mustOK(t, e.Close())
	if err := e.Gather([]Span{{Bytes: 1}}); err == nil {
		t.Fatal("Gather after Close: got nil error")
	}
}

func TestHostGatherAllocatesNothingAfterWarmUp(t *testing.T) {
	g := roundTripGeometries[2]
	e, err := NewHostEngine(g.deviceBytes(), g.newSlabs(0), 2)
	mustOK(t, err)
	defer e.Close()
	spans := g.spansFor(0, g.objectPlacements(0, 40, 0, 30))
	mustOK(t, e.Gather(spans))
	if allocs := testing.AllocsPerRun(20, func() { _ = e.Gather(spans); _ = e.Scatter(spans) }); allocs != 0 {
		t.Fatalf("Gather+Scatter allocated %.1f times per call after warm-up, want 0", allocs)
	}
}

func TestNewEngineKinds(t *testing.T) {
	e, err := NewEngine(KindHost, 16, nil, 0)
	mustOK(t, err)
	defer e.Close()
	if e.Name() != KindHost {
		t.Fatalf("Name = %q, want %q", e.Name(), KindHost)
	}
	if _, err := NewEngine("tpu", 16, nil, 0); err == nil {
		t.Fatal("unknown kind: got nil error")
	}
	if _, err := NewHostEngine(-1, nil, 0); err == nil {
		t.Fatal("negative device size: got nil error")
	}
	if !CUDABuild {
		if _, err := NewEngine(KindCUDA, 16, nil, 0); err == nil {
			t.Fatal("cuda engine in the CPU build: got nil error")
		}
	}
}
