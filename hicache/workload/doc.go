// Package workload owns the event stream every rank of a CP group replays identically (DESIGN.md):
// the events and their compact broadcast form, the embedded synthetic multi-turn chat workload, the
// JSON Lines trace formats (token ids, and Mooncake's block ids, kept compact until each rank
// expands them), the ideal prefix hit count of a replica's share, and how a DP replica takes its
// share. CP rank 0 reads or generates it; the others receive it by broadcast.
//
// It is pure computation over its inputs: it must not import mpi, nccl, kernels or hicache, and its
// output depends on nothing but its arguments (no clock, no map order, no randomness but seeded
// streams).
package workload
