// The C reference of the all-reduce benchmark: the loop an MPI user would write in C, timed with MPI_Wtime
// inside C, so that the only difference from cphicache's own all-reduce is the Go binding on top of it.
#ifndef REF_ALLREDUCE_H
#define REF_ALLREDUCE_H
#include <mpi.h>
#include <stdint.h>

// ref_configure makes every call below wait and reduce as cphicache's binding does on the same library
// (mpi/yield.go, mpi/cph_mpi.c), so that the columns still differ by the binding alone: with yield_when_idle,
// MPI_Iallreduce tested with sched_yield between tests instead of MPI_Allreduce; where MPI_Reduce_local shows
// the library ordering MPI_UINT64_T as signed (MPICH 4.0.2), MPI_INT64_T on values with the sign bit flipped.
// Call it after MPI_Init; without it, every call is a plain MPI_Allreduce of MPI_UINT64_T.
int ref_configure(int yield_when_idle);

// ref_world_f is MPI_COMM_WORLD as a Fortran handle, the form communicators cross the Go/C boundary in.
MPI_Fint ref_world_f(void);

// ref_allreduce_loop runs `warmup` untimed, then `iters` timed MPI_Allreduce(MPI_IN_PLACE, buf, count,
// MPI_UINT64_T, MPI_MIN) (as ref_configure set) on the communicator comm_f, after a barrier, and stores this rank's mean seconds per
// call in *seconds_per_call. It returns MPI's code of the first call that failed, or MPI_SUCCESS.
//
// gap_seconds 0 is the OSU loop: calls back to back, timed as a whole. A positive gap spins that long, then
// enters a barrier (so that a rank descheduled during its spin does not make the other wait inside the timed
// call), and times each call alone: a call made between stretches of other work (writing_check's case).
int ref_allreduce_loop(MPI_Fint comm_f, uint64_t *buf, int count, int iters, int warmup, double gap_seconds,
                       double *seconds_per_call);

// ref_allreduce_once is one untimed call on the same buffer, for validation outside the timed loop.
int ref_allreduce_once(MPI_Fint comm_f, uint64_t *buf, int count);

// ref_allreduce_floor is the same call on MPI_COMM_WORLD and nothing else: what a Go program enters through one
// cgo crossing per call when it has no binding around MPI at all (the benchmark's "cgo floor"). The buffer
// arrives as an address, as mpi/ passes it.
int ref_allreduce_floor(uintptr_t buf_addr, int count);
#endif
