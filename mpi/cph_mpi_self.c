//go:build mpiself

// The mpiself build's C side: cph_mpi.h's helpers for a job of one process and no MPI library. Every
// communicator has rank 0 and size 1; a reduction or gather of one rank copies send to recv (in place, nothing);
// a broadcast from rank 0 leaves the buffer as it is. Error codes other than MPI_SUCCESS never arise.
#define _GNU_SOURCE // sched_getaffinity and CPU_COUNT; before any system header
#include "cph_mpi.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CPH_SELF_THREAD_FUNNELED 1
#define CPH_SELF_NAME_BYTES 256

static int cph_self_initialized, cph_self_finalized;
static MPI_Fint cph_self_next_comm = 1; // 0 is the world

int cph_init(int *provided) {
	cph_self_initialized = 1;
	*provided = CPH_SELF_THREAD_FUNNELED;
	return MPI_SUCCESS;
}
int cph_finalized(int *flag) { *flag = cph_self_finalized; return MPI_SUCCESS; }
int cph_initialized(int *flag) { *flag = cph_self_initialized; return MPI_SUCCESS; }
int cph_finalize(void) { cph_self_finalized = 1; return MPI_SUCCESS; }
MPI_Fint cph_world(void) { return 0; }
int cph_thread_funneled(void) { return CPH_SELF_THREAD_FUNNELED; }

int cph_rank(MPI_Fint c, int *rank) { (void)c; *rank = 0; return MPI_SUCCESS; }
int cph_size(MPI_Fint c, int *size) { (void)c; *size = 1; return MPI_SUCCESS; }

int cph_split(MPI_Fint c, int color, int key, MPI_Fint *out) {
	(void)c, (void)color, (void)key;
	*out = cph_self_next_comm++;
	return MPI_SUCCESS;
}
int cph_split_shared(MPI_Fint c, int key, MPI_Fint *out) { return cph_split(c, 0, key, out); }
int cph_free(MPI_Fint c) { (void)c; return MPI_SUCCESS; }
int cph_barrier(MPI_Fint c) { (void)c; return MPI_SUCCESS; }

int cph_allreduce(MPI_Fint c, uintptr_t send_addr, uintptr_t recv_addr, int count, int type, int op) {
	(void)c, (void)type, (void)op;
	if (send_addr != recv_addr) memmove((void *)recv_addr, (const void *)send_addr, (size_t)count * 8);
	return MPI_SUCCESS;
}

int cph_allgather(MPI_Fint c, void *send, void *recv, int count, int type) {
	(void)c;
	if (send != recv) memmove(recv, send, (size_t)count * (type < 0 ? 1 : 8));
	return MPI_SUCCESS;
}

int cph_bcast(MPI_Fint c, void *buf, int count, int root) { (void)c, (void)buf, (void)count, (void)root; return MPI_SUCCESS; }

int cph_gatherv(MPI_Fint c, void *send, int count, void *recv, int *counts, int *displs, int root) {
	(void)c, (void)counts, (void)root;
	if (count > 0 && (char *)recv + displs[0] != send) memmove((char *)recv + displs[0], send, (size_t)count);
	return MPI_SUCCESS;
}

int cph_abort(MPI_Fint c, int code) {
	(void)c;
	fflush(NULL);
	_exit(code);
}

int cph_processor_name(char *buf, int *len) {
	if (gethostname(buf, CPH_SELF_NAME_BYTES) != 0) snprintf(buf, CPH_SELF_NAME_BYTES, "localhost");
	buf[CPH_SELF_NAME_BYTES - 1] = 0;
	*len = (int)strlen(buf);
	return MPI_SUCCESS;
}
int cph_max_processor_name(void) { return CPH_SELF_NAME_BYTES; }

void cph_error_string(int code, char *buf, int *len) {
	*len = snprintf(buf, CPH_SELF_NAME_BYTES, "error %d of the one-process mpiself build", code);
}
int cph_max_error_string(void) { return CPH_SELF_NAME_BYTES; }

int cph_version(int *major, int *minor) { *major = 3; *minor = 1; return MPI_SUCCESS; }
int cph_library_version(char *buf, int *len) {
	*len = snprintf(buf, CPH_SELF_NAME_BYTES, "cphicache mpiself (one process, no MPI library)");
	return MPI_SUCCESS;
}
int cph_max_library_version(void) { return CPH_SELF_NAME_BYTES; }

void cph_set_yield_when_idle(int on) { (void)on; }
uint64_t cph_yielding_wait_count(void) { return 0; }

int cph_node_cpus(int *ranks, int *cpus) {
	cpu_set_t mine;
	CPU_ZERO(&mine);
	*ranks = 1;
	*cpus = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : 1;
	return MPI_SUCCESS;
}

int cph_uint64_order_workaround(void) { return 0; }

double MPI_Wtime(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
