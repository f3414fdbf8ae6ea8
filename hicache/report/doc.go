// Package report states a run from the tallies the runner (hicache/runner) gathered over the job:
// the summary a user reads first (report.go, l3.go, serving.go), the verdict and what it does not
// cover (verdict.go), the JSON report (--report), the Prometheus metrics file (metrics.go),
// validate's table and JSON (validation.go), what produced the result (provenance.go), sweep's
// OFFLINE bound on a run's hits (bound.go), and the
// bounded latency histograms both sides share (quantiles.go: the runner observes into them, the
// report reads them).
//
// The runner fills a Report, its plain data, and hands it over: nothing here enters a collective,
// waits or reads the clock but for a metrics file's time. It has tallies of its own (Tallies),
// which the runner fills from the core's counters and its own: it does not import the core
// (hicache/cache), nor the runner, MPI, NCCL, kernels, transport, shm or the L3 store, over every
// dependency (internal/lint holds it); of this module it uses the text helpers of errscope, outfile
// and sizing.
package report
