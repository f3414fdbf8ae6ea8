// Package hicache is a folder, not a library: it holds no code, only this map of the packages below
// it, in the order data flows through a job (cli -> config -> runner -> report, validate).
// docs/DESIGN.md holds the invariants they keep.
//
// The job around the cache:
//   - config: a job's options, the fault injections, their parsing, sizing and every check that
//     needs no MPI.
//   - runner: one pass of a job on one rank: set-up, the step program's Env (the collectives on the
//     CP group's communicator, the shared slab, the copy worker, the L3 I/O, the waits under the
//     watchdog, the content of device memory, fault injection), the serving clock's runner half,
//     and the tallies gathered for the report.
//   - validate: the validation matrix over the runner's passes (cphicache validate).
//   - spmd: MPI's start-up, the rank layout (world, CP groups, DP replicas), failure agreement, the
//     watchdog, signals and clean-up, whatever the cache does.
//   - transport: how a rank reaches its devices: the consensus's MIN all-reduce (MPI or NCCL), the
//     copy engine, the GPU layout.
//   - shm: the CP group's shared slab, one per node.
//
// The cache and what it decides, with no I/O:
//   - cache: one rank's cache as a state machine (the radix tree, the L2 allocator's decisions,
//     commit, eviction, flush, the placement assert and audit, the L3 tier's decisions) and the
//     step program that drives it.
//   - sim: the deterministic simulator of whole jobs over cache.
//   - workload: the event stream every rank of a CP group replays alike (the synthetic workload,
//     traces).
//   - l3block: an L3 block's key and page slots.
//
// The tiers and models around it:
//   - l3: the persistent L3 store (block files, verified reads, the byte budget).
//   - sizing: the model table, byte sizes with units, what a node's memory allows.
//   - prefill: the prefill cost model (a roofline over the GPU table, or a measured profile).
//   - serving: the serving clock's pure part (arrivals, batching, step costs, the virtual clock).
//
// What a user reads:
//   - report: the summary, the verdict, the JSON report and the metrics, from the runner's tallies.
//   - timeline: the Chrome trace of every rank's steps (run --timeline).
//   - outfile: the files a command writes, checked at start and written whole.
//   - sweep: cphicache sweep, a run per L2 size through the runner's exported API.
//
// Nothing imports this package, and no package below imports it (internal/lint holds both).
package hicache
