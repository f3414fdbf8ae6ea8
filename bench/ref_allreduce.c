//go:build !mpiself

// The C reference loop; see ref_allreduce.h. Compiled into the Go binary by cgo (with the MPI library's own
// pkg-config flags, i.e. what mpicc would pass) and, unchanged, into the standalone bench/c/allreduce_ref.
#include "ref_allreduce.h"

#include <sched.h>

// How ref_call waits and reduces (ref_configure).
static int ref_yield_when_idle, ref_uint64_as_signed;

// ref_wait completes a request as mpi/'s cph_wait does: 16 tests, then a yield of the core.
static int ref_wait(int rc, MPI_Request *req) {
	while (rc == MPI_SUCCESS) {
		for (int i = 0; i < 16; i++) {
			int done = 0;
			if ((rc = MPI_Test(req, &done, MPI_STATUS_IGNORE)) != MPI_SUCCESS || done) return rc;
		}
		sched_yield();
	}
	return rc;
}

int ref_configure(int yield_when_idle) {
	ref_yield_when_idle = yield_when_idle;
	uint64_t in = (uint64_t)1 << 63, inout = 1;
	int rc = MPI_Reduce_local(&in, &inout, 1, MPI_UINT64_T, MPI_MAX);
	ref_uint64_as_signed = rc == MPI_SUCCESS && inout != in;
	return rc;
}

// ref_call is the one all-reduce every side of the C reference makes: MPI_Allreduce in place, unless
// ref_configure said otherwise.
static int ref_call(MPI_Comm comm, uint64_t *buf, int count) {
	if (!ref_yield_when_idle && !ref_uint64_as_signed) {
		return MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_UINT64_T, MPI_MIN, comm);
	}
	const uint64_t sign = (uint64_t)1 << 63;
	MPI_Datatype type = MPI_UINT64_T;
	if (ref_uint64_as_signed) {
		for (int i = 0; i < count; i++) buf[i] ^= sign;
		type = MPI_INT64_T;
	}
	int rc;
	if (ref_yield_when_idle) {
		MPI_Request req;
		rc = ref_wait(MPI_Iallreduce(MPI_IN_PLACE, buf, count, type, MPI_MIN, comm, &req), &req);
	} else {
		rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, type, MPI_MIN, comm);
	}
	if (ref_uint64_as_signed) {
		for (int i = 0; i < count; i++) buf[i] ^= sign;
	}
	return rc;
}

// ref_barrier is MPI_Barrier, waiting as ref_call does.
static int ref_barrier(MPI_Comm comm) {
	if (!ref_yield_when_idle) return MPI_Barrier(comm);
	MPI_Request req;
	return ref_wait(MPI_Ibarrier(comm, &req), &req);
}

MPI_Fint ref_world_f(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }

int ref_allreduce_once(MPI_Fint comm_f, uint64_t *buf, int count) {
	return ref_call(MPI_Comm_f2c(comm_f), buf, count);
}

int ref_allreduce_floor(uintptr_t buf_addr, int count) {
	return ref_call(MPI_COMM_WORLD, (uint64_t *)buf_addr, count);
}

// spin busy-waits: a sleep would hand the core to another process and measure the wake-up instead.
static void spin(double seconds) {
	double start = MPI_Wtime();
	while (MPI_Wtime() - start < seconds) {
	}
}

int ref_allreduce_loop(MPI_Fint comm_f, uint64_t *buf, int count, int iters, int warmup, double gap_seconds,
                       double *seconds_per_call) {
	MPI_Comm comm = MPI_Comm_f2c(comm_f);
	int rc;
	for (int i = 0; i < warmup; i++) {
		if ((rc = ref_call(comm, buf, count)) != MPI_SUCCESS) return rc;
	}
	if ((rc = ref_barrier(comm)) != MPI_SUCCESS) return rc;
	double total = 0;
	if (gap_seconds > 0) {
		for (int i = 0; i < iters; i++) {
			spin(gap_seconds);
			if ((rc = ref_barrier(comm)) != MPI_SUCCESS) return rc;
			double start = MPI_Wtime();
			if ((rc = ref_call(comm, buf, count)) != MPI_SUCCESS) return rc;
			total += MPI_Wtime() - start;
		}
	} else {
		double start = MPI_Wtime();
		for (int i = 0; i < iters; i++) {
			if ((rc = ref_call(comm, buf, count)) != MPI_SUCCESS) return rc;
		}
		total = MPI_Wtime() - start;
	}
	*seconds_per_call = iters > 0 ? total / iters : 0;
	return MPI_SUCCESS;
}
