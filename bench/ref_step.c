//go:build !mpiself

// The C step loop; see ref_step.h. Compiled into the Go binary by cgo with the MPI library's own flags.
#include "ref_step.h"

// step_plan is a step's calls, with each word's offset from the step's base precomputed on this rank, so that
// the timed loop writes and checks a word with an add and a compare, as a rank writes its own frontiers.
typedef struct {
	int calls, words, size;
	int counts[ref_step_max_words];
	int is_max[ref_step_max_words];
	uint64_t offset[ref_step_max_words];
} step_plan;

// plan_step fills p. Word w of a step holds base + (rank + w) mod size on this rank, so the ranks holding the
// MIN (base) and the MAX (base + size - 1) change from word to word.
static int plan_step(step_plan *p, MPI_Comm comm, const int *counts, const int *is_max, int calls) {
	int rank, rc;
	if (calls < 1 || calls > ref_step_max_words) return MPI_ERR_COUNT;
	if ((rc = MPI_Comm_rank(comm, &rank)) != MPI_SUCCESS) return rc;
	if ((rc = MPI_Comm_size(comm, &p->size)) != MPI_SUCCESS) return rc;
	p->calls = calls;
	p->words = 0;
	for (int j = 0; j < calls; j++) {
		if (counts[j] < 1) return MPI_ERR_COUNT;
		p->counts[j] = counts[j];
		p->is_max[j] = is_max[j];
		p->words += counts[j];
	}
	if (p->words > ref_step_max_words) return MPI_ERR_COUNT;
	for (int w = 0; w < p->words; w++) p->offset[w] = (uint64_t)((rank + w) % p->size);
	return MPI_SUCCESS;
}

// one_step writes the step's words, makes its calls in order and adds its wrong words to *wrong.
static int one_step(const step_plan *p, MPI_Comm comm, uint64_t base, uint64_t *buf, int64_t *wrong) {
	for (int w = 0; w < p->words; w++) buf[w] = base + p->offset[w];
	uint64_t *at = buf;
	for (int j = 0; j < p->calls; j++) {
		int n = p->counts[j], rc;
		if ((rc = MPI_Allreduce(MPI_IN_PLACE, at, n, MPI_UINT64_T, p->is_max[j] ? MPI_MAX : MPI_MIN, comm)) != MPI_SUCCESS)
			return rc;
		uint64_t want = p->is_max[j] ? base + (uint64_t)(p->size - 1) : base;
		for (int w = 0; w < n; w++) *wrong += at[w] != want;
		at += n;
	}
	return MPI_SUCCESS;
}

// spin busy-waits: a sleep would hand the core to another process and measure the wake-up instead.
static void spin(double seconds) {
	double start = MPI_Wtime();
	while (MPI_Wtime() - start < seconds) {
	}
}

int ref_step_loop(MPI_Fint comm_f, const int *counts, const int *is_max, int calls, int iters, int warmup,
                  double gap_seconds, double *seconds_per_step, int64_t *wrong) {
	MPI_Comm comm = MPI_Comm_f2c(comm_f);
	step_plan p;
	uint64_t buf[ref_step_max_words];
	int rc;
	*wrong = 0;
	if ((rc = plan_step(&p, comm, counts, is_max, calls)) != MPI_SUCCESS) return rc;
	uint64_t step = 0;
	for (int i = 0; i < warmup; i++, step++) {
		if ((rc = one_step(&p, comm, step, buf, wrong)) != MPI_SUCCESS) return rc;
	}
	if ((rc = MPI_Barrier(comm)) != MPI_SUCCESS) return rc;
	double total = 0;
	if (gap_seconds > 0) {
		for (int i = 0; i < iters; i++, step++) {
			spin(gap_seconds);
			if ((rc = MPI_Barrier(comm)) != MPI_SUCCESS) return rc;
			double start = MPI_Wtime();
			if ((rc = one_step(&p, comm, step, buf, wrong)) != MPI_SUCCESS) return rc;
			total += MPI_Wtime() - start;
		}
	} else {
		double start = MPI_Wtime();
		for (int i = 0; i < iters; i++, step++) {
			if ((rc = one_step(&p, comm, step, buf, wrong)) != MPI_SUCCESS) return rc;
		}
		total = MPI_Wtime() - start;
	}
	*seconds_per_step = iters > 0 ? total / iters : 0;
	return MPI_SUCCESS;
}
