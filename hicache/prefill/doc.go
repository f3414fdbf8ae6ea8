// Package prefill owns the prefill cost model: how long a GPU group takes to prefill a batch, given
// each request's new tokens and its cached prefix, and from it where a cache tier pays (the
// break-even rate: the bytes per second of KV a tier must deliver to beat recomputing them). Two
// models answer the same question:
//
//   - Roofline: the model's FLOPs (linear layers at the dense FLOP/s of the deployment's precision,
//     bf16, fp8 or fp4, and causal attention over the cached prefix and the new tokens at bf16's)
//     over the group's rates times an efficiency, or its HBM bytes (the weights once a step, at the
//     precision's bytes, and the KV once) over the group's HBM rate, whichever is longer
//     (docs/PREFILL.md). The GPU table (gpu.go) cites each row's datasheet; the host link each way
//     is the datasheet's or the user's measurement (HostLink).
//   - Profile: times the user measured on their own engine (--prefill-profile), interpolated.
//
// Every function is pure: the package has no clock of its own (durations are float64 seconds, named
// so), reads no file (a profile comes in as an io.Reader; the caller opens it), and holds no state
// beyond the tables. It imports sizing/ (the model table) and errscope/ (ConfigError, naming the
// flag) and nothing else of this module; it must not import os, time, sync, MPI or any runner
// package, so the serving clock that uses it, the runner's or the simulator's, decides what a
// modelled second is.
package prefill
