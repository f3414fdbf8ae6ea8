// Declarations of the C helpers behind package mpi. Handles cross into Go as Fortran integers (MPI_Fint) so that
// Go never depends on MPI_Comm's representation, which differs between OpenMPI and MPICH.
#ifndef CPH_MPI_H
#define CPH_MPI_H
// The mpiself build (cgo_self.go) has no MPI library: cph_mpi_self.h declares the few names of mpi.h the Go side
// uses, and cph_mpi_self.c implements the helpers for a job of one process.
#ifdef CPH_MPI_SELF
#include "cph_mpi_self.h"
#else
#include <mpi.h>
#endif
#include <stdint.h>

enum { CPH_MIN = 0, CPH_MAX = 1, CPH_SUM = 2 };
enum { CPH_INT64 = 0, CPH_UINT64 = 1 };

int cph_init(int *provided);
int cph_finalized(int *flag);
int cph_initialized(int *flag);
int cph_finalize(void);
MPI_Fint cph_world(void);
int cph_thread_funneled(void);
int cph_rank(MPI_Fint c, int *rank);
int cph_size(MPI_Fint c, int *size);
int cph_split(MPI_Fint c, int color, int key, MPI_Fint *out);
int cph_split_shared(MPI_Fint c, int key, MPI_Fint *out);
int cph_free(MPI_Fint c);
int cph_barrier(MPI_Fint c);
int cph_allreduce(MPI_Fint c, uintptr_t send_addr, uintptr_t recv_addr, int count, int type, int op);
int cph_allgather(MPI_Fint c, void *send, void *recv, int count, int type);
int cph_bcast(MPI_Fint c, void *buf, int count, int root);
int cph_gatherv(MPI_Fint c, void *send, int count, void *recv, int *counts, int *displs, int root);
int cph_abort(MPI_Fint c, int code);
int cph_processor_name(char *buf, int *len);
int cph_max_processor_name(void);
void cph_error_string(int code, char *buf, int *len);
int cph_max_error_string(void);
int cph_version(int *major, int *minor);
int cph_library_version(char *buf, int *len);
int cph_max_library_version(void);
void cph_set_yield_when_idle(int on);
uint64_t cph_yielding_wait_count(void);
int cph_node_cpus(int *ranks, int *cpus);
int cph_uint64_order_workaround(void);
#endif
