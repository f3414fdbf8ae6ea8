// Package serving is the pure part of the serving clock (SERVING.md): when requests arrive, how CP
// rank 0 forms a step's batch from its queue by a token budget, what a step costs in modelled time
// (the load-backs and L3 reads its requests wait for, then the modelled prefill, in forward passes
// of at most the budget's new tokens: chunked prefill), and virtual clocks that replay a record of
// hits with a cache machinery that costs nothing: a run's own steps again (ReplaySteps), its ideal
// time to first token, a floor for every request; and steps formed anew from the arrivals
// (VirtualReplay), a sweep's TTFT at each size.
//
// It has no clock of its own. Every time here is nanoseconds of trace time (the workload's own
// clock, before any --time-scale), given by the caller; every cost is a modelled one, from the
// prefill model and the link rates the caller chose, and is labelled as modelled wherever a user
// reads it. So the same code prices a real run's steps, which the runner then also measures, and
// the virtual replays, which it does not.
//
// It must not import os, time, sync, MPI, NCCL, the runner (hicache) or its job packages: a
// function of its arguments only, as the cache core is.
package serving
