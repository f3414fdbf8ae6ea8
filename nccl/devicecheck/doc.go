// Package devicecheck holds only a test: a one-rank NCCL all-reduce on GPU memory through package
// nccl, for kernels/gpu-check.sh to run on a GPU machine with NVIDIA's libnccl.so.2.
//
// It exists apart from package nccl because that package's tests need MPI and ncclshim, and a lent
// GPU machine may have neither: this test makes its one-rank communicator with ncclGetUniqueId and
// ncclCommInitRank directly and needs no MPI: package nccl links none (NewCommOverMPI takes an
// interface), so the test binary loads on a GPU machine without any MPI library. Its test file
// builds only with the cuda tag (gorgonia.org/cu exits the process where there is no GPU). It must
// not be imported.
package devicecheck
