// Package spmd owns what every rank of a cphicache job does around the cache, whatever the cache
// does: starting MPI and checking the rank layout (world, CP groups of consecutive ranks inside one
// node, DP replicas), agreeing on failures so that no rank is left waiting and each failure is
// printed once by the right rank, the watchdog that bounds every wait, signals, the clean-up that
// must run however the process ends, and the broadcast of a trace on standard input (--trace -)
// from world rank 0, the one rank mpirun gives it to.
//
// It imports mpi and nothing else of this module: the cache (hicache), the transports and the
// workload build on it, never the other way round.
package spmd
