// Package nccl is cphicache's binding to NVIDIA's NCCL, loaded at run time with dlopen.
//
// It owns loading libnccl.so.2, checking its version, making unique ids and communicators, the
// all-reduce of int64 and uint64 values in device memory (MIN, MAX, SUM), and turning NCCL's result
// codes into Go errors that carry NCCL's own strings. It does not allocate device memory, launch
// kernels or synchronise streams.
//
// Why dlopen: NCCL is not packaged for Debian 12, its version differs from cluster to cluster, and
// the cphicache binary must build and start on machines without it (the CPU build never loads it).
// So nothing here links NCCL or includes nccl.h: cph_nccl.h declares the few types and entry points
// used, with the values of NVIDIA/nccl src/nccl.h.in, and Load looks them up with dlsym, as
// NVIDIA/go-nvml does for NVML. Load refuses a library older than 2.7 (MinVersion).
// ncclGetLastError (NCCL 2.13 and later) is optional: with an older library an Error simply has no
// Detail. So are ncclRedOpCreatePreMulSum and ncclRedOpDestroy (2.11 and later), which only the GPU
// check uses (AllreducePreMulSumUint64: on one rank the only reduction whose result a no-op cannot
// give). A loaded library is never unmapped (RTLD_NODELETE): NCCL's own threads may outlive its
// communicators.
//
// How the GPU build uses it: the step consensus (docs/DESIGN.md) is one all-reduce MIN of a fixed
// vector of words (frontiers, flags, digest, error word) over a CP group. In the GPU build the
// vector is reduced in device memory, so hicache makes one Comm per CP group at start-up with
// NewCommOverMPI (CP rank 0 makes the unique id and broadcasts it over the CP group; NCCL rank = CP
// rank), then at each step copies the vector to the device, all-reduces it MIN on its stream,
// synchronises that stream and reads the result back. The CPU build does the same MIN through MPI
// and never calls Load.
//
// Streams and buffers are opaque integers here (a CUDA stream handle and device addresses, as
// gorgonia.org/cu hands them out): NCCL only enqueues the collective on the stream and returns, so
// the caller must synchronise the stream before it reads the result.
//
// Communicators are made non-blocking where NCCL allows (2.14 and later: ncclCommInitRankConfig
// with NCCL 2.14's ncclConfig_t, blocking = 0), so that an init whose peers never arrive ends after
// a bound, aborted, instead of holding the thread in NCCL for good (InitRankWithin); calls on such
// a communicator wait out ncclInProgress themselves. Older libraries init blocking.
//
// Testing without a GPU: testdata/ncclshim.c is a stand-in libnccl.so.2 with the same symbols and
// ABI that implements them with MPI on host memory. The tests build it with mpicc (or take it from
// CPHICACHE_NCCL_LIB, which nccl.mk sets), dlopen it by path and run under mpirun like the mpi
// package's tests.
//
// Threading: NCCL calls may come from any goroutine, but NewCommOverMPI uses MPI and so must run on
// the MPI goroutine (see package mpi). A Comm must not be used from two goroutines at once.
//
// This package imports no other cphicache package (NewCommOverMPI takes any Bootstrap, which
// *mpi.Comm is; only its tests import mpi), so a binary that uses it alone links no MPI; its C code
// uses libdl only, never libmpi, libcuda or libnccl.
package nccl
