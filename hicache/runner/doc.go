// Package runner is one pass of a job on one rank: what a rank does around its cache. The cache
// itself, every decision of it and the step program that makes them, is package cache
// (hicache/cache), which does no I/O; runner is its Env (env.go): the step broadcast and the
// collectives on the CP group's communicator (consensus.go), the shared slab, the copy worker
// (copyworker.go), the L3 store and its goroutines (l3io.go), the local waits under the watchdog,
// the content of device memory, and fault injection. Around the replay it owns the start-up checks
// that need the job (limits.go) and the serving clock's runner half (serving*.go); for the report
// it only gathers the tallies over the job (gather.go, metricsfile.go) and hands them to package
// report (hicache/report), which states them.
//
// It takes its options sized (hicache/config) and, apart from them, what no command asks for:
// validate's modes (Pass) and a test's levers (Testing), both in pass.go; validate
// (hicache/validate) reads a pass's result (RunPass), never its state.
//
// docs/DESIGN.md holds the invariants. Two matter on every line here: every consensus collective
// runs on the CP group's communicator, never on the world (consensus holds only that communicator);
// and nothing here decides what a rank does next: the core does, from replicated state and agreed
// values, and this package only carries its work out and tells it what finished. runner imports
// config, the cache, its job packages (spmd, transport, shm, l3, workload), the serving clock's
// pure part (serving), the offline bound (bound, for sweep), report, mpi, pool and kernels;
// nothing imports it but the command (cli), bench, sweep and validate, and it must import none of
// them.
package runner
