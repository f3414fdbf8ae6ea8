// Package report states a run from the tallies the runner (package hicache) gathered over the job: the summary a
// user reads first (report.go, l3.go, serving.go), the verdict and what it does not cover (verdict.go), the JSON
// report (--report), the Prometheus metrics file (metrics.go), validate's table and JSON (validation.go), what
// produced the result (provenance.go), and the bounded latency histograms both sides share (quantiles.go: the
// runner observes into them, the report reads them).
//
// The runner fills a Report, its plain data, and hands it over: nothing here enters a collective, waits or reads
// the clock but for a metrics file's time. It imports the core (cache.Counters, which it fills a Report from) and
// the text helpers of spmd, outfile and sizing; it must not import the runner (hicache), nor MPI, NCCL, kernels,
// transport, shm or the L3 store directly (spmd links MPI: its plurals and NotCoveredError keep it here for now).
package report
