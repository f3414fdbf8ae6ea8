// Package hicache owns everything a rank does around the CP-shared L2 pool: the rank topology (CP groups and
// their communicators), the radix prefix cache, the controller (write-through, load-back, writing_check, flush),
// the placement assert and the collective watchdog.
//
// The scoping rule of the design (section 5) is enforced here: every consensus collective runs on the CP
// group's communicator, never on the world communicator. The page allocator itself lives in package pool, which
// must stay free of MPI, NCCL and clocks; hicache does the copies and the collectives around it. hicache imports
// mpi, nccl, pool and kernels, and nothing imports it but the command (main) and bench: it must not import either.
package hicache
