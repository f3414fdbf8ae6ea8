package kernels

import (
	"bytes"
	"testing"
)

// The CUDA engine's planning with made-up addresses: registration chunks and item splitting run
// here, in the CPU build, on layouts a GPU test can only hope the kernel gives it.

const testBase = uintptr(0x7f0000000000)

func TestRegistrationChunksSplitLargeRangesAndMergeTouchingOnes(t *testing.T) {
	const slab = cudaRegisterChunkBytes + 8<<20
	apart := registrationChunks([]hostRange{
		{testBase + slab + pageBytes, testBase + 2*slab + pageBytes}, // unsorted on purpose
		{testBase, testBase + slab},
	})
	if len(apart) != 4 || apart[0].hostAddr != testBase ||
		apart[1].hostAddr != testBase+cudaRegisterChunkBytes ||
		apart[2].hostAddr != testBase+slab+pageBytes {
		t.Errorf("two slabs a page apart: %+v, want two chunks each, from each slab's start", apart)
	}
	// Back to back (as two mmaps often are), the slabs merge into one range cut at 1 GiB from its
	// start: this is why the GPU test places its slabs apart.
	if merged := registrationChunks([]hostRange{
		{testBase, testBase + slab}, {testBase + slab, testBase + 2*slab},
	}); len(
		merged,
	) != 3 {
		t.Errorf("two touching slabs: %d chunks, want 3 (one merged range)", len(merged))
	}
	// Two slabs sharing a page register it once.
	shared := registrationChunks(
		[]hostRange{{testBase, testBase + 100}, {testBase + 100, testBase + 200}},
	)
	if len(shared) != 1 || shared[0].bytes != pageBytes {
		t.Errorf("two slabs in one page: %+v, want one chunk of one page", shared)
	}
}

// TestSpanItemsSplitAtChunksAndItemSize: a span that crosses a chunk boundary becomes items that
// each lie in one chunk, address it through that chunk's mapping, and together cover the span once,
// in order.
func TestSpanItemsSplitAtChunksAndItemSize(t *testing.T) {
	const slab = cudaRegisterChunkBytes + 8<<20
	chunks := registrationChunks([]hostRange{{testBase, testBase + slab}})
	for i := range chunks {
		chunks[i].devicePtr = 0x100000000000 * uintptr(
			i+1,
		) // mappings that do not continue across chunks
	}
	const device, bytes = uintptr(0x200000000), int64(3<<20 + 40)
	host := testBase + cudaRegisterChunkBytes - 1<<20 - 24
	for _, gather := range []bool{false, true} {
		items := appendSpanItems(nil, chunks, host, device, bytes, gather)
		covered, crossed := int64(0), false
		for k, it := range items {
			src, dst := it.src, it.dst
			if gather {
				src, dst = dst, src
			}
			mapped := uintptr(src) // the slab side, through a chunk's mapping
			c := chunks[chunkOf(chunks, host+uintptr(covered))]
			if mapped < c.devicePtr || mapped+uintptr(it.bytes) > c.devicePtr+uintptr(c.bytes) {
				t.Fatalf(
					"gather %v: item %d [%#x, +%d) leaves its chunk's mapping [%#x, +%d)",
					gather,
					k,
					mapped,
					it.bytes,
					c.devicePtr,
					c.bytes,
				)
			}
			if mapped != c.devicePtr+(host+uintptr(covered)-c.hostAddr) ||
				uintptr(dst) != device+uintptr(covered) {
				t.Fatalf("gather %v: item %d does not continue where item %d ended", gather, k, k-1)
			}
			if it.bytes > cudaItemMaxBytes {
				t.Fatalf(
					"gather %v: item %d of %d bytes, more than %d",
					gather,
					k,
					it.bytes,
					cudaItemMaxBytes,
				)
			}
			crossed = crossed || c.hostAddr != chunks[0].hostAddr
			covered += int64(it.bytes)
		}
		if covered != bytes || !crossed {
			t.Errorf(
				"gather %v: items cover %d of %d bytes, crossed into the second chunk: %v",
				gather,
				covered,
				bytes,
				crossed,
			)
		}
	}
}

// TestStagedCopySplitsAtChunksBothWays: the staged path (CUDAStagedEnv) copies a span between the
// slab and its chunks' staging, each byte to the offset the chunk's device mapping gives it: a span
// across a chunk boundary continues at the start of the next chunk's staging, in both directions.
func TestStagedCopySplitsAtChunksBothWays(t *testing.T) {
	slab := make([]byte, 3*pageBytes)
	for i := range slab {
		slab[i] = byte(i*7 + 1)
	}
	const cut = 5000
	base := sliceAddr(slab)
	chunks := []cudaChunk{
		{hostAddr: base, bytes: cut, stage: make([]byte, cut)},
		{hostAddr: base + cut, bytes: int64(len(slab)) - cut, stage: make([]byte, len(slab)-cut)},
	}
	span := slab[4000:7000]
	stagedCopy(chunks, span, true)
	if !bytes.Equal(chunks[0].stage[4000:cut], slab[4000:cut]) ||
		!bytes.Equal(chunks[1].stage[:7000-cut], slab[cut:7000]) {
		t.Fatalf("to the staging: the span's bytes are not at their chunks' offsets")
	}
	if !bytes.Equal(chunks[0].stage[:4000], make([]byte, 4000)) ||
		!bytes.Equal(chunks[1].stage[7000-cut:], make([]byte, len(slab)-7000)) {
		t.Fatalf("to the staging: bytes outside the span were written")
	}
	for _, c := range chunks {
		for i := range c.stage {
			c.stage[i] = 0xee
		}
	}
	before := bytes.Clone(slab)
	stagedCopy(chunks, span, false)
	for i := range slab {
		inside := i >= 4000 && i < 7000
		if inside && slab[i] != 0xee || !inside && slab[i] != before[i] {
			t.Fatalf(
				"from the staging: slab byte %d is %#x (inside the span: %v)",
				i,
				slab[i],
				inside,
			)
		}
	}
}
