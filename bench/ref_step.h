// The C references of the step benchmark: what one step's agreement costs when C makes the MPI calls, both as
// the seed design made them (one all-reduce per question) and as one fused vector (the floor of hicache's step
// consensus).
#ifndef REF_STEP_H
#define REF_STEP_H
#include <mpi.h>
#include <stdint.h>

// ref_step_max_words bounds the words of one step, all calls together.
enum { ref_step_max_words = 16 };

// ref_step_loop runs `warmup` untimed, then `iters` timed steps on the communicator comm_f, after a barrier. A
// step makes `calls` all-reduces in order, each in place on MPI_UINT64_T: call j reduces counts[j] words with
// MPI_MAX when is_max[j] is non-zero, else MPI_MIN. Before each step every word is written (the step's base plus
// an offset that spreads the MIN and the MAX over the ranks, as a rank writes its frontiers and flags), and after
// each call its words are checked against the value every rank can predict; *wrong gets the number of wrong
// words over all steps, warm-up included.
//
// gap_seconds 0: steps back to back, timed as a whole. A positive gap spins that long and enters a barrier
// before every step, and times each step alone (as ref_allreduce_loop does). It stores this rank's mean seconds
// per step in *seconds_per_step and returns MPI's code of the first call that failed, or MPI_SUCCESS.
int ref_step_loop(MPI_Fint comm_f, const int *counts, const int *is_max, int calls, int iters, int warmup,
                  double gap_seconds, double *seconds_per_step, int64_t *wrong);
#endif
