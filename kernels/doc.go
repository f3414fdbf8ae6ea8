// Package kernels owns the page gather/scatter copies between one rank's device KV buffer and the
// shared L2 slabs: Gather is the device-to-host backup direction (D2H), Scatter the load-back
// direction (H2D).
//
// The data path (hicache/) turns every backup or load-back into a list of contiguous copies,
// []Span, and hands it to an Engine. Two engines implement the same contract:
//
//   - HostEngine (every build): the "device" KV buffer is a Go []byte; copies run with copy()
//     (memmove) on a bounded set of persistent worker goroutines, after Coalesce has merged the
//     runs that are contiguous on both sides (layer_first turns runs of consecutive pages into one
//     copy; page_first does not).
//   - CUDAEngine (the `cuda` build tag only): the device KV buffer is cudaMalloc memory; the slabs
//     are registered with the GPU (mapped, in bounded chunks) and a CUDA kernel
//     (kernels/cuda/pagecopy.cu, compiled by `make kernels-ptx` to a fatbin of sm_90 SASS and PTX,
//     embedded, and loaded with the driver's JIT logs) copies them with 16-byte vector loads, one
//     warp per item, in a grid sized by the kernel's occupancy.
//
// Every span list is validated once, before any byte moves: a span out of bounds on either side is
// an error that names the span, and nothing is copied.
//
// This package must not import mpi/, nccl/, pool/ or hicache/: it knows bytes and offsets, not
// pages, ranks or layouts. gorgonia.org/cu is imported only by files behind the `cuda` build tag,
// because its package init calls cuInit and exits the process on a machine without a GPU.
package kernels
