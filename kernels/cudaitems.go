package kernels

import (
	"slices"
	"unsafe"
)

// The CUDA engine's host-side planning, in pure Go so that the CPU build tests it: which host
// ranges to register with the GPU, and how a span becomes copy items. kernels/cuda.go does the
// driver calls.

const (
	// cudaRegisterChunkBytes bounds one cuMemHostRegister call: registering pins pages, and a
	// bounded call keeps the driver's work per call (and any failure) small and the error message
	// specific.
	cudaRegisterChunkBytes = 1 << 30
	// cudaItemMaxBytes splits long spans (coalesced layer_first runs) so that one warp does not
	// copy megabytes alone while the others idle; 256 KiB is 512 uint4 accesses per lane, which
	// hides the launch of the item.
	cudaItemMaxBytes = 256 << 10
	pageBytes        = 4096
)

// cudaItem must match CopyItem in pagecopy.cu.
type cudaItem struct {
	dst, src, bytes, reserved uint64
}

// cudaChunk is one registered range of host memory: host [hostAddr, hostAddr+bytes) is devicePtr on
// the GPU. A staged chunk (CUDAStagedEnv) is not registered: devicePtr maps stage, pinned memory of
// the same size that the driver allocated, and the engine copies each span between the slab and
// stage on the host.
type cudaChunk struct {
	hostAddr, devicePtr uintptr
	bytes               int64
	stage               []byte // nil when the slab itself is registered
}

// hostRange is [lo, hi) of host addresses.
type hostRange struct{ lo, hi uintptr }

// slabRanges are the slabs' address ranges; empty slabs have none.
func slabRanges(slabs [][]byte) []hostRange {
	var ranges []hostRange
	for _, s := range slabs {
		if len(s) > 0 {
			base := sliceAddr(s)
			ranges = append(ranges, hostRange{base, base + uintptr(len(s))})
		}
	}
	return ranges
}

// registrationChunks rounds the ranges out to pages, merges those that touch or overlap, and cuts
// each merged range into chunks of at most cudaRegisterChunkBytes: the calls to cuMemHostRegister.
// Rounding and merging first matters: two slabs that share a page (or one mapping split into slabs)
// would otherwise register the same page twice, which the driver refuses. devicePtr is left 0 for
// the caller to fill.
func registrationChunks(ranges []hostRange) []cudaChunk {
	rounded := make([]hostRange, 0, len(ranges))
	for _, r := range ranges {
		rounded = append(
			rounded,
			hostRange{r.lo &^ (pageBytes - 1), (r.hi + pageBytes - 1) &^ (pageBytes - 1)},
		)
	}
	slices.SortFunc(rounded, func(a, b hostRange) int { return int(int64(a.lo) - int64(b.lo)) })
	var merged []hostRange
	for _, r := range rounded {
		if n := len(merged); n > 0 && r.lo <= merged[n-1].hi {
			merged[n-1].hi = max(merged[n-1].hi, r.hi)
			continue
		}
		merged = append(merged, r)
	}
	var chunks []cudaChunk
	for _, r := range merged {
		for lo := r.lo; lo < r.hi; lo += cudaRegisterChunkBytes {
			chunks = append(
				chunks,
				cudaChunk{hostAddr: lo, bytes: int64(min(r.hi-lo, cudaRegisterChunkBytes))},
			)
		}
	}
	return chunks
}

// chunkOf returns the index of the chunk holding host address addr; validation guarantees there is
// one.
func chunkOf(chunks []cudaChunk, addr uintptr) int {
	i, _ := slices.BinarySearchFunc(chunks, addr, func(c cudaChunk, a uintptr) int {
		switch {
		case c.hostAddr+uintptr(c.bytes) <= a:
			return -1
		case c.hostAddr > a:
			return 1
		}
		return 0
	})
	return i
}

// appendSpanItems appends the items of one span between host address host (in a slab) and device
// address device, split at registration-chunk boundaries (a chunk's mapped addresses need not
// continue into the next chunk's) and at cudaItemMaxBytes.
func appendSpanItems(
	items []cudaItem,
	chunks []cudaChunk,
	host, device uintptr,
	bytes int64,
	gather bool,
) []cudaItem {
	for left := bytes; left > 0; {
		c := chunks[chunkOf(chunks, host)]
		n := min(left, cudaItemMaxBytes, int64(c.hostAddr+uintptr(c.bytes)-host))
		mapped := c.devicePtr + (host - c.hostAddr)
		item := cudaItem{dst: uint64(device), src: uint64(mapped), bytes: uint64(n)}
		if gather {
			item.dst, item.src = uint64(mapped), uint64(device)
		}
		items = append(items, item)
		host, device, left = host+uintptr(n), device+uintptr(n), left-n
	}
	return items
}

// stagedCopy copies slab, a span's bytes in a slab, to (toStage) or from its chunks' staging, split
// where a chunk ends as the items are: before a scatter's kernel reads the staging, after a
// gather's wrote it.
func stagedCopy(chunks []cudaChunk, slab []byte, toStage bool) {
	host := sliceAddr(slab)
	for len(slab) > 0 {
		c := chunks[chunkOf(chunks, host)]
		off := int64(host - c.hostAddr)
		n := min(int64(len(slab)), c.bytes-off)
		if toStage {
			copy(c.stage[off:off+n], slab[:n])
		} else {
			copy(slab[:n], c.stage[off:off+n])
		}
		slab, host = slab[n:], host+uintptr(n)
	}
}

// sliceAddr is the address of b's first byte: slabs are mmap'ed memory, which never moves.
func sliceAddr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }
