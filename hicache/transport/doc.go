// Package transport owns how a rank reaches its devices: the transport of the step consensus's MIN
// all-reduce (MPI, or NCCL on the device in the GPU build, or NCCL over host buffers with the test
// shim), the copy engine (host memory in the CPU build, the CUDA engine in the GPU build), which
// GPU a rank uses (the rank-to-GPU layout), and the guarded start-up that makes them on every rank
// and agrees on the outcome.
//
// Its build-tagged twins live here (nccl_host.go / nccl_cuda.go, engine_host.go / engine_cuda.go);
// only kernels and nccl talk to CUDA and NCCL themselves. It imports spmd, kernels and nccl (mpi
// only through spmd), and must not import hicache.
package transport
