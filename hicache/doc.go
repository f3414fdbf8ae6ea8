// Package hicache owns everything a rank does around the CP-shared L2 pool: the rank topology (CP groups and
// their communicators), the radix prefix cache, the controller (write-through, load-back, commit, flush), the
// step consensus that reconciles the ranks of a CP group, the placement assert and the commit audit, and the
// watchdog.
//
// DESIGN.md at the repository's root holds the invariants this package keeps. Two matter on every line here:
// every consensus collective runs on the CP group's communicator, never on the world (the consensus type holds
// only that communicator); and every rank of a group enters the same collectives in the same order, so a rank's
// own failure waits for the next consensus instead of returning early. The page allocator lives in package pool,
// which must stay free of MPI, NCCL and clocks; hicache does the copies and the collectives around it. hicache
// imports mpi, nccl, pool and kernels, and nothing imports it but the command (main) and bench: it must not
// import either.
package hicache
