// Package bench owns cphicache's benchmarks: the micro-benchmarks of the pieces a cache layer is
// chosen by (the writing_check MIN all-reduce, one step's agreement, the page gather/scatter
// copies, the allocator's reserve/commit/release, the L3 store's block writes and verified reads)
// and the end-to-end summary of the main job, each printed beside a reference measured in the same
// run: a C MPI_Allreduce loop (ref_allreduce.c, linked in through cgo), C loops of the seed
// design's four calls per step and of the one fused call (ref_step.c), a memcpy of the same bytes,
// the allocator's own smallest pool, plain files of the same bytes in the same directory, the job
// with the placement assert at the end only.
//
// Output follows NVIDIA nccl-tests and the OSU micro-benchmarks: a '#' header with the version, the
// full configuration and the rank -> host map, fixed-width columns with a units line, a #wrong
// column wherever a result is validated (validation runs outside the timed loop), and a non-zero
// count of wrong results is an error the command turns into a non-zero exit. The same rows go to
// JSON for machines and to PNG plots (gonum.org/v1/plot) for people. How every number is derived,
// and what it is held against, is in PERFORMANCE.md.
//
// Benchmarks measure; they never assert a time. This package may import mpi/, pool/, kernels/ and
// hicache/ (for the topology and the run report); none of those may import it.
package bench
