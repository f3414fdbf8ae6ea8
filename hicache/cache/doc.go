// Package cache is one rank's cache as a state machine with no I/O: the radix tree over its device
// pages, the shared L2 allocator's decisions, write-through and load-back, commit, eviction, flush,
// the placement assert and the commit audit's scheduling, the L3 tier's decisions, and the step
// program (program.go) that drives them for a whole event stream. Everything it decides is a
// function of the events and of values the CP group agreed.
//
// It reaches the world only through its Env (env.go), and it is TigerBeetle's shape, not etcd
// raft's: the core runs its own loop (Core.Run, the step program) and calls a blocking Env, where
// raft's RawNode hands its caller a Ready and waits to be told Advance. The events come in,
// collectives go out as vectors and come back agreed, work to do (copies, block writes and reads)
// goes out and its completion comes back through Complete, the content checks are asked for. The
// real runner (hicache/runner) is one Env, over MPI, the shared slab, the copy worker and the L3
// goroutines; the simulator (hicache/sim) is another, over a seeded scheduler. So the same code
// runs in a job and under the simulator, and any interleaving the simulator finds replays from its
// seed. What the tests and the simulator attach (the step invariants, the eviction model, the
// deliberate bugs, the simulator's views of the L2 and the device pages, of each serve and of each
// prefetch decision and reservation) is in Config.Testing (testing.go), zero in a run; the scenario
// files (testdata/*.txt, scenario_test.go, on cockroachdb/datadriven) show its decisions step by
// step on a one-rank Env.
//
// It owns no goroutine, clock, file, communicator or logger, and must not import MPI, NCCL, the
// kernels, the runner or its job packages, nor os, time, sync, log or randomness (internal/lint
// holds it to that). It may use hicache/l3block for the L3 blocks' chain keys and page slots (not
// the L3 store, hicache/l3, which does file I/O), workload for the events, pool for the allocator,
// and internal/errscope for the errors' scopes.
package cache
