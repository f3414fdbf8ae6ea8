// Package sim is a deterministic simulator of whole cphicache jobs over the IO-free core
// (hicache/cache): every CP group of a job, every rank of each, in one process and one thread of
// control. Each rank's step program is a coroutine (iter.Pull) that the scheduler resumes one at a
// time; a seeded PRNG decides which rank runs next, when each copy, block write, block read and
// existence answer completes (sometimes much later than the others'), and which faults happen. A
// broadcast lets a fast rank run ahead, as MPI's does; only an all-reduce holds the group together.
// The memory is real (Memory: every byte the content function's), the L3 a simulated directory
// shared by the job's groups, with the faults a real one has.
//
// After every step it checks that the ranks of a group hold the same state (Core.StateHash, not
// only the digest); at every start of work, that no slot part is written while another operation
// still references it, on any rank (the reference rule: load-backs, audits, block writes and
// reads); and at the end, that nothing was wrong (no mismatch, no audit or L3 block mismatch, no
// failure that no fault explains), that every injected fault ended the run loudly, and, when the
// job's copies are synchronous and it has no L3 or faults, that the hits by tier equal a sequential
// model's (model.go). Its own book of the L3 (blocks.go) checks every block write's key against the
// workload, every block read's bytes in the slab, that a block is written once at a time (and,
// under write_through, that every block whole in a committed backup is written), and that the
// prefetches the group agreed cut short are those whose reads failed; and each step's hits by tier
// against the provenance of the bytes it loaded back (provenance.go). Its decision models check
// what every rank agrees and no byte contradicts against the simulator's own answers and views: the
// existence vote (votes.go), each prefetch decision and refused reservation (plan.go), the prefix
// each request was served (served.go) and the write_back policy (writeback.go). Jobs are drawn
// plain, as swarm jobs or as liveness jobs (swarm.go, liveness.go: a simulated watchdog bounds
// every wait and every job). A violation, or a panic anywhere in a job, names the job's seed, the
// step and what differs; the same seed (and mode) replays it exactly.
//
// It must not import MPI, NCCL, the kernels, the runner (hicache) or its job packages, nor read a
// clock: the command that runs it measures its speed.
package sim
