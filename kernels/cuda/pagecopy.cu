// pagecopy.cu: the page gather/scatter copy kernel of cphicache's cuda build.
//
// Compiled to PTX by `make kernels/cuda/pagecopy.ptx` (nvcc -arch=sm_90 -ptx); the PTX is committed and
// embedded in the Go binary (kernels/cuda.go), which loads it with cuModuleLoadData at engine start.
//
// The host side (kernels/cuda.go) turns each Gather (device -> slab) or Scatter (slab -> device) span list into
// copy items with absolute addresses: device memory from cuMemAlloc, and slab memory registered with
// cuMemHostRegister(DEVICEMAP) and addressed through its mapped device pointer, so the kernel reads or writes
// host memory directly over PCIe/NVLink-C2C. One kernel serves both directions.
//
// One warp per item: the host splits long spans into items of at most a few hundred KiB, so that the grid's
// warps share the work evenly. Each lane moves 16 bytes per access (uint4), four accesses in flight before it
// stores, because reads of host memory across the bus are latency bound: the more loads outstanding per warp,
// the closer to the link's bandwidth.

// CopyItem must match cudaItem in kernels/cuda.go: four 64-bit words, 32 bytes.
struct CopyItem {
    unsigned long long dst;
    unsigned long long src;
    unsigned long long bytes;
    unsigned long long reserved;
};

// copyVector16 copies n16 16-byte words, lane-strided across the warp, four words in flight per lane.
__device__ __forceinline__ void copyVector16(uint4* __restrict__ dst, const uint4* __restrict__ src,
                                             unsigned long long n16, unsigned int lane) {
    unsigned long long k = lane;
    for (; k + 96 < n16; k += 128) {
        uint4 a = src[k];
        uint4 b = src[k + 32];
        uint4 c = src[k + 64];
        uint4 d = src[k + 96];
        dst[k] = a;
        dst[k + 32] = b;
        dst[k + 64] = c;
        dst[k + 96] = d;
    }
    for (; k < n16; k += 32) {
        dst[k] = src[k];
    }
}

// copyVector8 copies n8 8-byte words, lane-strided: the path of items that are 8-byte but not 16-byte
// multiples, as a part of an odd number of 24-byte tokens is.
__device__ __forceinline__ void copyVector8(unsigned long long* __restrict__ dst,
                                            const unsigned long long* __restrict__ src, unsigned long long n8,
                                            unsigned int lane) {
    for (unsigned long long k = lane; k < n8; k += 32) {
        dst[k] = src[k];
    }
}

// copy_items copies every item; warps take items in a grid-stride loop, so any grid size is correct.
// Each item takes the widest access its addresses and length allow: 16 bytes, else 8, else single bytes. A part
// (page tokens x token bytes) is a multiple of 8 bytes, as hicache requires of token sizes, but not always of
// 16 (24- or 40-byte tokens with an odd page size); both buffers are page aligned, so the byte path is for
// callers outside hicache only.
extern "C" __global__ void __launch_bounds__(256) copy_items(const CopyItem* __restrict__ items,
                                                             unsigned long long count) {
    const unsigned int lane = threadIdx.x & 31;
    const unsigned long long warp = (blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x) >> 5;
    const unsigned long long warps = (gridDim.x * (unsigned long long)blockDim.x) >> 5;
    for (unsigned long long i = warp; i < count; i += warps) {
        const CopyItem item = items[i];
        const unsigned long long align = item.dst | item.src | item.bytes;
        if ((align & 15) == 0) {
            copyVector16((uint4*)item.dst, (const uint4*)item.src, item.bytes >> 4, lane);
        } else if ((align & 7) == 0) {
            copyVector8((unsigned long long*)item.dst, (const unsigned long long*)item.src, item.bytes >> 3, lane);
        } else {
            char* dst = (char*)item.dst;
            const char* src = (const char*)item.src;
            for (unsigned long long k = lane; k < item.bytes; k += 32) {
                dst[k] = src[k];
            }
        }
    }
}
