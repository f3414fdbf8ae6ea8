// The C reference loop; see ref_allreduce.h. Compiled into the Go binary by cgo (with the MPI library's own
// pkg-config flags, i.e. what mpicc would pass) and, unchanged, into the standalone bench/c/allreduce_ref.
#include "ref_allreduce.h"

MPI_Fint ref_world_f(void) { return MPI_Comm_c2f(MPI_COMM_WORLD); }

int ref_allreduce_once(MPI_Fint comm_f, uint64_t *buf, int count) {
	return MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_UINT64_T, MPI_MIN, MPI_Comm_f2c(comm_f));
}

int ref_allreduce_floor(uintptr_t buf_addr, int count) {
	return MPI_Allreduce(MPI_IN_PLACE, (void *)buf_addr, count, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
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
		if ((rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_UINT64_T, MPI_MIN, comm)) != MPI_SUCCESS) return rc;
	}
	if ((rc = MPI_Barrier(comm)) != MPI_SUCCESS) return rc;
	double total = 0;
	if (gap_seconds > 0) {
		for (int i = 0; i < iters; i++) {
			spin(gap_seconds);
			if ((rc = MPI_Barrier(comm)) != MPI_SUCCESS) return rc;
			double start = MPI_Wtime();
			if ((rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_UINT64_T, MPI_MIN, comm)) != MPI_SUCCESS) return rc;
			total += MPI_Wtime() - start;
		}
	} else {
		double start = MPI_Wtime();
		for (int i = 0; i < iters; i++) {
			if ((rc = MPI_Allreduce(MPI_IN_PLACE, buf, count, MPI_UINT64_T, MPI_MIN, comm)) != MPI_SUCCESS) return rc;
		}
		total = MPI_Wtime() - start;
	}
	*seconds_per_call = iters > 0 ? total / iters : 0;
	return MPI_SUCCESS;
}
