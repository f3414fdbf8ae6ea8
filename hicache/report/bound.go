package report

// OfflineBound is a one-rank run's OFFLINE bound (hicache/bound, asked for by sweep through
// config.Options.OfflineBound): the most L1 + L2 hit tokens any policy could have served over the
// run's events from CapacityPages pages (L1's pages and the L2's slots together), Belady's MIN over
// the prefix tree, which reads every request's future as no cache can. Its cut of the events is the
// replay's, but for --flush-every under the serving clock, whose flushes fall where each run's own
// steps do: those it leaves out, which only raises it (a schedule with a flush is one without), so
// that one bound holds for every policy at the size.
type OfflineBound struct {
	CapacityPages int   `json:"capacity_pages"`
	HitTokens     int64 `json:"hit_tokens"`
	PromptTokens  int64 `json:"prompt_tokens"`
	// Serving is, with the serving clock, the same requests on a virtual clock with the bound's
	// hits, each request's as MIN's schedule gives them, every hit loaded at no cost (the bound
	// says which pages hit, not from which tier): MODELLED. It is the TTFT of the bound's hits,
	// not a bound on any policy's TTFT: MIN maximises the hit tokens of all the requests, not the
	// hits of each.
	Serving *OfflineBoundServing `json:"serving,omitempty"`
}

// OfflineBoundServing is the MODELLED TTFT and throughput at the OFFLINE bound's hits.
type OfflineBoundServing struct {
	TTFT                  Percentiles `json:"ttft_s"`
	PromptTokensPerSecond float64     `json:"prompt_tokens_per_s"`
}
