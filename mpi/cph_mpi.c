//go:build !mpiself

// C side of the mpi package: every function returns MPI's own code so Go can check it.
#define _GNU_SOURCE // sched_getaffinity and CPU_COUNT; before any system header
#include "cph_mpi.h"

#include <sched.h>
#include <time.h>
#include <stddef.h> // NULL: OpenMPI's mpi.h includes it, MPICH's does not

// Handles cross the Go/C boundary as Fortran integers so that Go never sees MPI_Comm's representation.
//
// The conversion back is cached: OpenMPI's MPI_Comm_f2c takes a lock whenever MPI runs above
// MPI_THREAD_SINGLE (about 26 ns here, a fortieth of a one-element all-reduce, paid on every collective).
// An entry is filled on first use, dropped when its communicator is freed and again when MPI hands out an
// integer for a new one, so a reused integer never finds a stale entry. Only the FUNNELED thread calls in here,
// so the cache needs no lock.
#define CPH_COMM_CACHE 64
static MPI_Comm cph_comm_cache[CPH_COMM_CACHE];
static int cph_comm_cached[CPH_COMM_CACHE];

static MPI_Comm cph_comm(MPI_Fint f) {
	if (f < 0 || f >= CPH_COMM_CACHE) return MPI_Comm_f2c(f);
	if (!cph_comm_cached[f]) {
		MPI_Comm comm = MPI_Comm_f2c(f);
		if (comm == MPI_COMM_NULL) return comm; // not a live communicator: nothing to remember
		cph_comm_cache[f] = comm;
		cph_comm_cached[f] = 1;
	}
	return cph_comm_cache[f];
}

static void cph_comm_forget(MPI_Fint f) {
	if (f >= 0 && f < CPH_COMM_CACHE) cph_comm_cached[f] = 0;
}

static MPI_Op cph_op(int op) {
	switch (op) {
	case CPH_MIN: return MPI_MIN;
	case CPH_MAX: return MPI_MAX;
	default:      return MPI_SUM;
	}
}

static MPI_Datatype cph_type(int t) { return t == CPH_UINT64 ? MPI_UINT64_T : MPI_INT64_T; }

// Waiting by yielding (mpi/yield.go says when and why): a blocking collective is started as its non-blocking
// twin and tested, with sched_yield between tests, so that a rank with nothing to do hands its core to the
// rank it waits for. Set once, by Init, on the FUNNELED thread.
static int cph_yield_when_idle;
static uint64_t cph_yielding_waits;

void cph_set_yield_when_idle(int on) { cph_yield_when_idle = on; }
uint64_t cph_yielding_wait_count(void) { return cph_yielding_waits; }

// CPH_POLLS_PER_YIELD tests come between two yields: MPICH advances a non-blocking collective's schedule one step
// per test, and a yield after every test made each step wait for the other processes' time slices (one-element
// all-reduce at 8 ranks on 2 loaded cores: 8 to 16 tests per yield mostly 28 to 37 us, 1 test 56 us to 2.8 ms).
#define CPH_POLLS_PER_YIELD 16
#ifndef CPH_YIELDS_BEFORE_SLEEP
#define CPH_YIELDS_BEFORE_SLEEP 8
#endif
#define CPH_SLEEP_MIN_NS 1000
// A waiting rank's sleep doubles up to CPH_SLEEP_MAX_NS. 1 ms beat 200 us by 6% on the L2-only replay of the
// shared trace at 8 ranks on 2 cores (median of 3, alternating: 7.26 against 7.84 s): a rank that has waited
// that long waits for ranks with work, which then get its core more often, and the last rank's arrival costs a
// sleeper at most a millisecond of a step that takes several.
#ifndef CPH_SLEEP_MAX_NS
#define CPH_SLEEP_MAX_NS 1000000
#endif

// cph_wait completes the request a non-blocking call just started (rc is that call's code).
static int cph_wait(int rc, MPI_Request *req) {
	if (rc != MPI_SUCCESS) return rc;
	cph_yielding_waits++;
	long sleep_ns = 0;
	for (int yields = 0;; yields++) {
		for (int i = 0; i < CPH_POLLS_PER_YIELD; i++) {
			int done = 0;
			if ((rc = MPI_Test(req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS || done) return rc;
		}
		if (yields < CPH_YIELDS_BEFORE_SLEEP) {
			sched_yield();
			continue;
		}
		sleep_ns = sleep_ns == 0 ? CPH_SLEEP_MIN_NS : sleep_ns * 2;
		if (sleep_ns > CPH_SLEEP_MAX_NS) sleep_ns = CPH_SLEEP_MAX_NS;
		struct timespec ts = {0, sleep_ns};
		nanosleep(&ts, NULL);
	}
}

static int cph_probe_uint64_order(void);

int cph_init(int *provided) {
	int flag = 0;
	int rc = MPI_Initialized(&flag);
	if (rc != MPI_SUCCESS) return rc;
	if (flag) {
		rc = MPI_Query_thread(provided);
		return rc != MPI_SUCCESS ? rc : cph_probe_uint64_order();
	}
	rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, provided);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	if (rc != MPI_SUCCESS) return rc;
	return cph_probe_uint64_order();
}

int cph_finalized(int *flag) { return MPI_Finalized(flag); }
int cph_initialized(int *flag) { return MPI_Initialized(flag); }
int cph_finalize(void) { return MPI_Finalize(); }
MPI_Fint cph_world(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }
int cph_thread_funneled(void) { return MPI_THREAD_FUNNELED; }

int cph_rank(MPI_Fint c, int *rank) { return MPI_Comm_rank(cph_comm(c), rank); }
int cph_size(MPI_Fint c, int *size) { return MPI_Comm_size(cph_comm(c), size); }

int cph_split(MPI_Fint c, int color, int key, MPI_Fint *out) {
	MPI_Comm nc;
	int rc = MPI_Comm_split(cph_comm(c), color, key, &nc);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
	*out = MPI_Comm_c2f(nc);
	cph_comm_forget(*out);
	return rc;
}

int cph_split_shared(MPI_Fint c, int key, MPI_Fint *out) {
	MPI_Comm nc;
	int rc = MPI_Comm_split_type(cph_comm(c), MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, &nc);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Comm_set_errhandler(nc, MPI_ERRORS_RETURN);
	*out = MPI_Comm_c2f(nc);
	cph_comm_forget(*out);
	return rc;
}

int cph_free(MPI_Fint c) {
	MPI_Comm comm = cph_comm(c);
	cph_comm_forget(c);
	return MPI_Comm_free(&comm);
}

int cph_barrier(MPI_Fint c) {
	if (!cph_yield_when_idle) return MPI_Barrier(cph_comm(c));
	MPI_Request req;
	return cph_wait(MPI_Ibarrier(cph_comm(c), &req), &req);
}

// MPICH 4.0.2 orders MPI_UINT64_T (every unsigned type) as signed under MPI_MIN and MPI_MAX
// (pmodels/mpich#6083): MAX(1<<63, 1) is 1. cph_init asks the library with MPI_Reduce_local; where it is wrong,
// unsigned MIN and MAX travel as int64 with the sign bit flipped, which maps unsigned order onto signed order.
// SUM needs nothing: it wraps to the same bits either way.
#define CPH_SIGN_BIT ((uint64_t)1 << 63)
static int cph_uint64_as_signed;

static int cph_probe_uint64_order(void) {
	uint64_t in = CPH_SIGN_BIT, inout = 1;
	int rc = MPI_Reduce_local(&in, &inout, 1, MPI_UINT64_T, MPI_MAX);
	if (rc == MPI_SUCCESS) cph_uint64_as_signed = inout != CPH_SIGN_BIT;
	return rc;
}

int cph_uint64_order_workaround(void) { return cph_uint64_as_signed; }

static int cph_allreduce_typed(MPI_Comm comm, const void *send, void *recv, int count, MPI_Datatype dt, MPI_Op op) {
	if (!cph_yield_when_idle) return MPI_Allreduce(send, recv, count, dt, op, comm);
	MPI_Request req;
	return cph_wait(MPI_Iallreduce(send, recv, count, dt, op, comm, &req), &req);
}

int cph_allreduce(MPI_Fint c, uintptr_t send_addr, uintptr_t recv_addr, int count, int type, int op) {
	void *send = (void *)send_addr, *recv = (void *)recv_addr;
	const void *s = send == recv ? MPI_IN_PLACE : send;
	if (type != CPH_UINT64 || op == CPH_SUM || !cph_uint64_as_signed) {
		return cph_allreduce_typed(cph_comm(c), s, recv, count, cph_type(type), cph_op(op));
	}
	const uint64_t *in = send;
	uint64_t *out = recv;
	for (int i = 0; i < count; i++) out[i] = in[i] ^ CPH_SIGN_BIT;
	int rc = cph_allreduce_typed(cph_comm(c), MPI_IN_PLACE, out, count, MPI_INT64_T, cph_op(op));
	for (int i = 0; i < count; i++) out[i] ^= CPH_SIGN_BIT;
	return rc;
}

int cph_allgather(MPI_Fint c, void *send, void *recv, int count, int type) {
	MPI_Datatype dt = type < 0 ? MPI_BYTE : cph_type(type);
	if (!cph_yield_when_idle) return MPI_Allgather(send, count, dt, recv, count, dt, cph_comm(c));
	MPI_Request req;
	return cph_wait(MPI_Iallgather(send, count, dt, recv, count, dt, cph_comm(c), &req), &req);
}

int cph_bcast(MPI_Fint c, void *buf, int count, int root) {
	if (!cph_yield_when_idle) return MPI_Bcast(buf, count, MPI_BYTE, root, cph_comm(c));
	MPI_Request req;
	return cph_wait(MPI_Ibcast(buf, count, MPI_BYTE, root, cph_comm(c), &req), &req);
}

int cph_gatherv(MPI_Fint c, void *send, int count, void *recv, int *counts, int *displs, int root) {
	if (!cph_yield_when_idle) return MPI_Gatherv(send, count, MPI_BYTE, recv, counts, displs, MPI_BYTE, root, cph_comm(c));
	MPI_Request req;
	return cph_wait(MPI_Igatherv(send, count, MPI_BYTE, recv, counts, displs, MPI_BYTE, root, cph_comm(c), &req), &req);
}

int cph_abort(MPI_Fint c, int code) { return MPI_Abort(cph_comm(c), code); }

int cph_processor_name(char *buf, int *len) { return MPI_Get_processor_name(buf, len); }
int cph_max_processor_name(void) { return MPI_MAX_PROCESSOR_NAME; }

void cph_error_string(int code, char *buf, int *len) {
	if (MPI_Error_string(code, buf, len) != MPI_SUCCESS) *len = 0;
}
int cph_max_error_string(void) { return MPI_MAX_ERROR_STRING; }

int cph_version(int *major, int *minor) { return MPI_Get_version(major, minor); }
int cph_library_version(char *buf, int *len) { return MPI_Get_library_version(buf, len); }
int cph_max_library_version(void) { return MPI_MAX_LIBRARY_VERSION_STRING; }

// cph_node_cpus counts the ranks of this node (MPI_COMM_TYPE_SHARED) and the CPUs they may run on between them:
// the union of their affinity masks, which is what a launcher's binding or a cgroup cpuset leaves them.
int cph_node_cpus(int *ranks, int *cpus) {
	cpu_set_t mine, all;
	CPU_ZERO(&mine);
	if (sched_getaffinity(0, sizeof mine, &mine) != 0) CPU_SET(0, &mine); // unknown: count one CPU
	MPI_Comm node;
	int rc = MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
	if (rc != MPI_SUCCESS) return rc;
	if ((rc = MPI_Comm_size(node, ranks)) == MPI_SUCCESS &&
	    (rc = MPI_Allreduce(&mine, &all, (int)sizeof mine, MPI_BYTE, MPI_BOR, node)) == MPI_SUCCESS) {
		*cpus = CPU_COUNT(&all);
	}
	int rc_free = MPI_Comm_free(&node);
	return rc != MPI_SUCCESS ? rc : rc_free;
}
