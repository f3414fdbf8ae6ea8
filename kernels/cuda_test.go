//go:build cuda

package kernels

// These tests need a GPU: they are compiled by make test-cuda-build and run by kernels/gpu-check.sh
// on a GPU machine. The shared checks of host_test.go run unchanged on the CUDA engine, so both
// engines pass the same byte-for-byte verification.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"gorgonia.org/cu"
)

// TestMain holds GPU 0's primary context for the binary's whole life, as a serving process holds it
// for its own. Each engine retains the context and releases it when closed, and a context released
// by its last holder is destroyed and made anew by the next engine: hundreds of milliseconds each
// (a context and its memory pools), for each of the round trips' hundred-odd engines and each
// benchmark, inside gpu-check.sh's bound on the step.
func TestMain(m *testing.M) {
	if err := GPUMissing(); err != nil {
		fmt.Fprintf(os.Stderr, "kernels tests: no usable GPU: %v\n", err)
		os.Exit(2)
	}
	device, err := cu.GetDevice(0)
	if err == nil {
		_, err = device.RetainPrimaryCtx()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kernels tests: retaining GPU 0's primary context: %v\n", err)
		os.Exit(2)
	}
	code := m.Run()
	if err := device.ReleasePrimaryCtx(); err != nil {
		fmt.Fprintf(os.Stderr, "kernels tests: releasing GPU 0's primary context: %v\n", err)
		code = max(code, 1)
	}
	os.Exit(code)
}

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
		b, err := syscall.Mmap(
			-1,
			0,
			int(slabBytes),
			syscall.PROT_READ|syscall.PROT_WRITE,
			syscall.MAP_ANON|syscall.MAP_SHARED,
		)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { syscall.Munmap(b) })
		slabs[i] = b
	}
	return slabs
}

// cudaGeometries add to the CPU ones parts of typical KV sizes (64 KiB and 1 MiB), a part that is a
// multiple of 8 bytes but not 16 (the kernel's 8-byte path) and an odd one (its byte path).
var cudaGeometries = append(
	append([]testGeometry(nil), roundTripGeometries...),
	testGeometry{
		ranks:        4,
		layers:       4,
		payloads:     2,
		devicePages:  64,
		slotsPerSlab: 24,
		slabs:        3,
		partBytes:    64 << 10,
	},
	testGeometry{
		ranks:        4,
		layers:       4,
		payloads:     2,
		devicePages:  64,
		slotsPerSlab: 24,
		slabs:        3,
		partBytes:    64 << 10,
		pageFirst:    true,
	},
	testGeometry{
		ranks:        2,
		layers:       2,
		payloads:     1,
		devicePages:  24,
		slotsPerSlab: 16,
		slabs:        2,
		partBytes:    1 << 20,
	},
	testGeometry{
		ranks:        2,
		layers:       3,
		payloads:     2,
		devicePages:  32,
		slotsPerSlab: 20,
		slabs:        2,
		partBytes:    1000,
		pageFirst:    true,
	},
	testGeometry{
		ranks:        2,
		layers:       3,
		payloads:     2,
		devicePages:  32,
		slotsPerSlab: 20,
		slabs:        2,
		partBytes:    1001,
		pageFirst:    true,
	},
)

func TestCUDAGatherScatterRoundTrip(t *testing.T) {
	checkGatherScatterRoundTrip(t, newTestCUDAEngine, cudaGeometries, 8)
	if !t.Failed() {
		t.Logf(
			"proves: copy_items gathered and scattered %d geometries (both layouts; 16-byte, 8-byte and byte paths) between device memory and mmap'ed slabs, byte for byte",
			len(cudaGeometries),
		)
	}
}

func TestCUDABoundsErrorCopiesNothing(t *testing.T) {
	checkBoundsErrorCopiesNothing(t, newTestCUDAEngine)
}

func TestCUDAZeroLengthEdgeCases(t *testing.T) { checkZeroLengthEdgeCases(t, newTestCUDAEngine) }

// TestCUDAMmapSlabsAcrossRegistrationChunks registers two slabs larger than one registration chunk
// and copies spans that cross a chunk boundary, which the engine must split. The slabs come from
// one mapping with a page between them: two separate mappings may lie back to back, registration
// would merge them into one range, and the spans chosen below might then not cross a boundary at
// all. The test asserts both premises.
func TestCUDAMmapSlabsAcrossRegistrationChunks(t *testing.T) {
	const slabBytes = cudaRegisterChunkBytes + 8<<20
	region := mmapSlabs(t, 1, 2*slabBytes+pageBytes)[0]
	slabs := [][]byte{region[:slabBytes:slabBytes], region[slabBytes+pageBytes:]}
	e := newTestCUDAEngine(t, 16<<20, slabs).(*CUDAEngine)
	if len(e.chunks) != 4 {
		t.Fatalf(
			"two slabs of %d bytes apart registered as %d chunks, want 2 each",
			slabBytes,
			len(e.chunks),
		)
	}
	spans := []Span{
		{
			DeviceOffsetBytes: 0,
			Slab:              0,
			SlabOffsetBytes:   cudaRegisterChunkBytes - 3<<20,
			Bytes:             8 << 20,
		},
		{
			DeviceOffsetBytes: 8 << 20,
			Slab:              1,
			SlabOffsetBytes:   cudaRegisterChunkBytes - 5<<20,
			Bytes:             8 << 20,
		},
	}
	for i, s := range spans {
		first := uintptr(unsafe.Pointer(&slabs[s.Slab][s.SlabOffsetBytes]))
		if chunkOf(e.chunks, first) == chunkOf(e.chunks, first+uintptr(s.Bytes)-1) {
			t.Fatalf("span %d lies in one registration chunk: nothing to split", i)
		}
	}
	// staged (CUDAStagedEnv), the chunks are the driver's own memory: nothing registered to check
	if !e.Staged() {
		checkChunksRegisteredApart(t, e)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	content := randomBytes(rng, 16<<20)
	mustOK(t, e.WriteDevice(0, content))
	mustOK(t, e.Gather(spans))
	checkItemsStayInChunks(t, e, len(spans))
	var gathered []byte
	for _, s := range spans {
		gathered = append(gathered, slabs[s.Slab][s.SlabOffsetBytes:s.SlabOffsetBytes+s.Bytes]...)
	}
	if j := firstDiff(gathered, content); j >= 0 {
		t.Fatalf("Gather across a registration chunk: byte %d differs", j)
	}
	mustOK(t, e.WriteDevice(0, make([]byte, 16<<20)))
	mustOK(t, e.Scatter(spans))
	got := make([]byte, 16<<20)
	mustOK(t, e.ReadDevice(0, got))
	if j := firstDiff(got, content); j >= 0 {
		t.Fatalf("Scatter across a registration chunk: byte %d differs", j)
	}
	how := "registered as %d separate cuMemHostRegister chunks (each unregistered alone and registered again)"
	if e.Staged() {
		how = "NOT registered: staged through %d cuMemHostAlloc buffers (" + CUDAStagedEnv + "=1)"
	}
	t.Logf(
		"proves: 2 slabs of %d MiB "+how+", the copy items split at their boundaries, the bytes round-tripped",
		slabBytes>>20,
		len(e.chunks),
	)
}

// checkChunksRegisteredApart checks the split at the driver: each chunk is a registration of its
// own, so cuMemHostUnregister of its first byte succeeds (a range registered whole would refuse a
// start inside it, CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED). Each is registered again at once, and
// its mapping taken anew. With unified addressing the mapped address equals the host one, so a copy
// alone could not tell a split from none.
func checkChunksRegisteredApart(t *testing.T, e *CUDAEngine) {
	t.Helper()
	mustOK(t, e.locked(func() error {
		for i := range e.chunks {
			c := &e.chunks[i]
			if err := unregisterHost(c.hostAddr); err != nil {
				return fmt.Errorf(
					"chunk %d of %d (%d bytes at %#x) is not a registration of its own: %w",
					i,
					len(e.chunks),
					c.bytes,
					c.hostAddr,
					err,
				)
			}
			ptr, err := registerHostMapped(c.hostAddr, c.bytes)
			if err != nil {
				return fmt.Errorf("registering chunk %d again: %w", i, err)
			}
			c.devicePtr = ptr
		}
		return nil
	}))
}

// checkItemsStayInChunks checks the last call's copy items: each one's slab side lies inside one
// chunk's mapping, and the spans, which cross chunk boundaries, became more items than spans.
func checkItemsStayInChunks(t *testing.T, e *CUDAEngine, spans int) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, it := range e.items {
		slabSide := uintptr(it.dst) // Gather: device -> slab
		inside := false
		for _, c := range e.chunks {
			inside = inside ||
				(slabSide >= c.devicePtr && slabSide+uintptr(it.bytes) <= c.devicePtr+uintptr(c.bytes))
		}
		if !inside {
			t.Fatalf(
				"item %d [%#x, +%d) lies in no single registration chunk",
				k,
				slabSide,
				it.bytes,
			)
		}
	}
	if len(e.items) <= spans {
		t.Fatalf("%d spans across chunk boundaries became %d items: not split", spans, len(e.items))
	}
}

// TestCUDAModuleLoadsAndSizesItsGrid: the fatbin's copy_items loads, built for this GPU's
// architecture (sm_90 SASS on an H100/H200), and the grid is SMs x the occupancy the driver
// computes for it. A module that cannot load reports the driver's JIT error log: PTX with an error
// in it must fail with the log's text.
func TestCUDAModuleLoadsAndSizesItsGrid(t *testing.T) {
	e := newTestCUDAEngine(t, 1<<20, nil).(*CUDAEngine)
	var binaryVersion, regs, sms int
	var loadErr error
	mustOK(t, e.locked(func() error {
		var err error
		if binaryVersion, err = e.copyFn.Attribute(cu.BinaryVersion); err != nil {
			return err
		}
		if regs, err = e.copyFn.Attribute(cu.NumRegs); err != nil {
			return err
		}
		if sms, err = e.device.Attribute(cu.MultiprocessorCount); err != nil {
			return err
		}
		_, loadErr = loadModule(
			".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry broken() { not_an_instruction; }\n",
		)
		return nil
	}))
	if e.blocksPerSM < 1 || e.blocksMax != sms*e.blocksPerSM {
		t.Errorf("grid bound %d for %d SMs at %d blocks per SM", e.blocksMax, sms, e.blocksPerSM)
	}
	if loadErr == nil || !strings.Contains(loadErr.Error(), "JIT error log") ||
		strings.Contains(loadErr.Error(), `JIT error log: ""`) {
		t.Errorf(
			"loading broken PTX: %v, want an error carrying the driver's JIT error log",
			loadErr,
		)
	}
	t.Logf(
		"proves: copy_items loaded from the fatbin (%s) as binary version %d, %d registers; grid bound %d blocks = %d SMs x %d (occupancy); a broken PTX load reports its JIT log: %.120v",
		describeFatbin(
			pagecopyFatbin,
		),
		binaryVersion,
		regs,
		e.blocksMax,
		sms,
		e.blocksPerSM,
		loadErr,
	)
}

// TestCUDAConsecutiveCallsUseTheirOwnItems runs calls of different item lists back to back, each
// verified: a kernel that read the item list before this call's upload landed would copy the
// previous call's pages. Lists grow past cudaItemsMin, so the item buffers are replaced between
// calls too.
func TestCUDAConsecutiveCallsUseTheirOwnItems(t *testing.T) {
	g := testGeometry{
		ranks:        1,
		layers:       2,
		payloads:     2,
		devicePages:  2048,
		slotsPerSlab: 2048,
		slabs:        2,
		partBytes:    4096,
		pageFirst:    true,
	}
	slabs := mmapSlabs(t, g.slabs, g.slabBytes())
	e := newTestCUDAEngine(t, g.deviceBytes(), slabs)
	rng := rand.New(rand.NewPCG(11, 13))
	content := randomBytes(rng, g.deviceBytes())
	mustOK(t, e.WriteDevice(0, content))
	for call := range 40 {
		spans := g.spansFor(0, g.randomPlacements(rng, 1+rng.IntN(g.devicePages)))
		for _, slab := range slabs {
			clear(slab)
		}
		mustOK(t, e.Gather(spans))
		for i, s := range spans {
			if !bytes.Equal(
				slabs[s.Slab][s.SlabOffsetBytes:s.SlabOffsetBytes+s.Bytes],
				content[s.DeviceOffsetBytes:s.DeviceOffsetBytes+s.Bytes],
			) {
				t.Fatalf(
					"call %d (%d spans): span %d holds other bytes than its device pages",
					call,
					len(spans),
					i,
				)
			}
		}
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

// cudaBenchTotalBytes is one operation of the GPU benchmarks, sized to prove the copy rate and no
// more: at the tens of GB/s of a PCIe 5 link it is 1-3 ms, against a launch and a synchronisation
// of tens of microseconds, so the rate is within a few percent of the link's. Each shape's set-up
// (a device buffer of this size, slabs of twice it mapped and registered, both filled with a
// pattern and the first copy verified byte for byte) costs more than its timed loop; a larger
// operation would only lengthen gpu-check.sh's bench step.
const cudaBenchTotalBytes = 64 << 20

// cudaBenchPartBytes are the part sizes the GPU benchmarks time: a small page part (4 KiB, the
// kernel's per-item costs), a typical one (64 KiB) and a large one (1 MiB, where a copy is all
// bandwidth).
var cudaBenchPartBytes = []int64{4 << 10, 64 << 10, 1 << 20}
