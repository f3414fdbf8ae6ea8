package report

// The metrics file's counters (metrics.go): every counter series a report's fields make, in the
// order the file lists them, one helper a subject: the cache's decisions, the copies and checks,
// the steps, and the L3 tier's, when the run had one.

// counterSample is one counter series: a name, its help, at most one label of its own, and whether
// the counter is a rank's own (agg:"rank" in Tallies) rather than its group's.
type counterSample struct {
	name, help, label, value string
	count                    int64
	perRank                  bool
}

// The help of the counters that more than one helper below lists, one series a label value.
const (
	promptTokensHelp = "prompt tokens by the tier that served them: l1 (device hit), l2 (shared-slab hit), l3 (prefetched from storage, with --l3-dir), computed (miss)"
	copyBytesHelp    = "bytes copied between device and the shared slab: d2h (backups), h2d (load-backs)"
)

// counterSamples are r's counter series, in the metrics file's order: the cache's decisions, the
// copies and checks, the steps replayed, then the L3 tier's, which a run without one has none of.
func counterSamples(r *Report) []counterSample {
	samples := cacheCounterSamples(r)
	samples = append(samples, copyAndCheckCounterSamples(r)...)
	samples = append(samples, counterSample{"steps_total", "steps replayed", "", "", r.Steps, false})
	if r.L3 != nil {
		samples = append(samples, l3CounterSamples(r)...)
	}
	return samples
}

// cacheCounterSamples are the series of the cache's decisions, replicated on every rank of a CP
// group and so its group's: the prompt tokens the device and the shared slab served or missed,
// the L2 backups, and the evictions and load-backs between the tiers.
func cacheCounterSamples(r *Report) []counterSample {
	return []counterSample{
		{"prompt_tokens_total", promptTokensHelp, "tier", "l1", r.Hits.L1Tokens, false},
		{"prompt_tokens_total", promptTokensHelp, "tier", "l2", r.Hits.L2Tokens, false},
		{"prompt_tokens_total", promptTokensHelp, "tier", "computed", r.Hits.MissTokens, false},
		{
			"backups_reserved_total",
			"L2 backups whose slots were reserved",
			"",
			"",
			r.Backup.Reserved,
			false,
		},
		{
			"backups_committed_total",
			"L2 backups committed (every CP rank finished its parts)",
			"",
			"",
			r.Backup.Committed,
			false,
		},
		{
			"backup_reserve_misses_total",
			"L2 backups skipped on a full pool",
			"",
			"",
			r.Backup.ReserveMisses,
			false,
		},
		{"l1_evictions_total", "device (L1) node evictions", "", "", r.L1.Evictions, false},
		{
			"l2_evictions_total",
			"shared-slab (L2) object evictions",
			"",
			"",
			r.Backup.L2Evictions,
			false,
		},
		{"load_backs_total", "nodes loaded back from L2 into L1", "", "", r.L1.LoadBacks, false},
	}
}

// copyAndCheckCounterSamples are the series of the copies' bytes and of what the checks caught:
// mostly a rank's own, since each rank copies and verifies its own parts; the placement
// divergences, which the group's consensus agrees on, are the group's.
func copyAndCheckCounterSamples(r *Report) []counterSample {
	return []counterSample{
		{"copy_bytes_total", copyBytesHelp, "direction", "d2h", r.Bytes.D2H, true},
		{"copy_bytes_total", copyBytesHelp, "direction", "h2d", r.Bytes.H2D, true},
		{
			"placement_divergences_total",
			"placement divergences caught by the assert",
			"",
			"",
			r.Placement.Divergences,
			false,
		},
		// side by side, so that a rule can alert on a load-back left unverified: the two differ
		{
			"load_back_pages_total",
			"pages loaded back from L2 into L1, every one to be verified",
			"",
			"",
			r.Verify.PagesLoadedBack,
			true,
		},
		{
			"load_back_pages_verified_total",
			"load-back pages verified byte for byte against their content",
			"",
			"",
			r.Verify.PagesChecked,
			true,
		},
		{
			"load_back_mismatches_total",
			"load-back pages with a wrong byte",
			"",
			"",
			r.Verify.Mismatches,
			true,
		},
		{
			"audit_mismatches_total",
			"audited committed objects with a wrong byte",
			"",
			"",
			r.Verify.AuditMismatches,
			true,
		},
		{"copy_errors_total", "page copies that failed", "", "", r.Verify.CopyErrors, true},
	}
}

// l3CounterSamples are the L3 tier's series, for a run with one (r.L3 not nil): the prompt tokens
// it served, the block files each rank wrote and read and their bytes, and what failed or was
// dropped, so that a dashboard can tell a slow L3 from a broken one.
func l3CounterSamples(r *Report) []counterSample {
	const io = "L3 block files by direction: write (published), read (read and verified into the L2)"
	const ioBytes = "payload bytes of those block files by direction"
	l3 := r.L3
	return []counterSample{
		{"prompt_tokens_total", promptTokensHelp, "tier", "l3", r.Hits.L3Tokens, false},
		{"l3_blocks_total", io, "direction", "write", l3.Writes, true},
		{"l3_blocks_total", io, "direction", "read", l3.Reads, true},
		{"l3_bytes_total", ioBytes, "direction", "write", l3.WriteBytes, true},
		{"l3_bytes_total", ioBytes, "direction", "read", l3.ReadBytes, true},
		{
			"l3_write_errors_total",
			"L3 blocks dropped on a failed write (ENOSPC, EIO)",
			"",
			"",
			l3.WriteErrors,
			true,
		},
		{
			"l3_writes_skipped_total",
			"L3 blocks not written: the directory is read-only",
			"",
			"",
			l3.WritesSkipped,
			true,
		},
		{
			"l3_read_failures_total",
			"L3 reads that failed and were served as misses",
			"",
			"",
			l3.ReadFailures,
			true,
		},
		{
			"l3_corrupt_total",
			"L3 block files that failed their checks (removed, never served)",
			"",
			"",
			l3.Corrupt,
			true,
		},
		{
			"l3_evictions_total",
			"L3 block files removed to keep --l3-bytes",
			"",
			"",
			l3.Evictions,
			true,
		},
		{
			"l3_prefetch_timeouts_total",
			"L3 prefetches not agreed done when their request was served",
			"",
			"",
			l3.PrefetchTimeouts,
			false,
		},
	}
}
