// allreduce_ref: a standalone, OSU-style C program around the same loop as `cphicache bench allreduce`'s C
// column (../ref_allreduce.c), built by `make bench-c` with mpicc. It exists to show that the C column measured
// inside the Go binary equals a plain C program's: run both under the same mpirun flags and compare.
//
//   mpirun -np 2 build/bench/allreduce_ref [max_count] [iters]
//
// CPHICACHE_MPI_YIELD=1 waits as cphicache's binding does when it yields (mpi/yield.go); its "auto" is not read
// here.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../ref_allreduce.h"

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	const char *yield = getenv("CPHICACHE_MPI_YIELD");
	if (ref_configure(yield != NULL && strcmp(yield, "1") == 0) != MPI_SUCCESS) {
		fprintf(stderr, "allreduce_ref: MPI_Reduce_local failed\n");
		return 1;
	}
	int max_count = argc > 1 ? atoi(argv[1]) : 1 << 16;
	int iters = argc > 2 ? atoi(argv[2]) : 1000;
	int rank, size;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	uint64_t *buf = malloc(sizeof(uint64_t) * (size_t)max_count);
	if (rank == 0) {
		printf("# allreduce_ref: MPI_Allreduce(MPI_IN_PLACE, MPI_UINT64_T, MPI_MIN) on MPI_COMM_WORLD, %d ranks, %d iterations\n", size, iters);
		printf("# %10s %10s %16s\n", "size(B)", "count", "Avg Latency(us)");
	}
	int status = 0;
	for (int count = 1; count <= max_count; count *= 4) {
		for (int i = 0; i < count; i++) buf[i] = (uint64_t)(rank + 1) * 1000003u + (uint64_t)i;
		double seconds = 0, sum = 0;
		int rc = ref_allreduce_loop(ref_world_f(), buf, count, iters, iters / 10 + 1, 0, &seconds);
		if (rc != MPI_SUCCESS) { fprintf(stderr, "allreduce_ref: MPI error %d\n", rc); status = 1; break; }
		MPI_Reduce(&seconds, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0) printf("  %10zu %10d %16.2f\n", (size_t)count * sizeof(uint64_t), count, 1e6 * sum / size);
	}
	free(buf);
	MPI_Finalize();
	return status;
}
