package report

import (
	"fmt"
	"io"
)

// L3Report is the report's L3 section: the group's decisions (summed over CP groups) and every
// rank's I/O.
type L3Report struct {
	Dir            string `json:"dir"`
	Namespace      string `json:"namespace_fingerprint"`
	WritePolicy    string `json:"write_policy"`
	PrefetchPolicy string `json:"prefetch_policy"`
	BlockTokens    int    `json:"block_tokens"`
	// --l3-bytes: each CP group's budget (a 1/k share on each of its k nodes)
	Bytes int64 `json:"bytes"`
	// 1, or k part-files a block for a group over k nodes
	FilesPerBlock int   `json:"files_per_block"`
	Writes        int64 `json:"writes"`      // block files published
	WriteBytes    int64 `json:"write_bytes"` // their payloads
	// blocks dropped on a failed write (ENOSPC, EIO): the run went on
	WriteErrors   int64 `json:"write_errors"`
	WritesSkipped int64 `json:"writes_skipped"` // blocks not written: the directory is read-only
	Reads         int64 `json:"reads"`          // blocks read and verified into the L2
	ReadBytes     int64 `json:"read_bytes"`
	// reads that failed (absent, corrupt, I/O error): misses
	ReadFailures int64 `json:"read_failures"`
	// of those, block files that failed their checks (removed, never served)
	Corrupt   int64 `json:"corrupt"`
	Evictions int64 `json:"evictions"` // block files removed to keep --l3-bytes
	// agreed prefetches (one per request, or per prefix a step shares)
	Prefetches int64 `json:"prefetches"`
	// PrefetchBlocks: the blocks they asked for; PrefetchMisses: prefetches cut short by a failed
	// read.
	PrefetchBlocks int64 `json:"prefetch_blocks"`
	PrefetchMisses int64 `json:"prefetch_misses"`
	// prefetches not agreed done when their request was served
	PrefetchTimeouts int64 `json:"prefetch_timeouts"`
	// prefetches a flush dropped before their request was served
	PrefetchFlushed int64 `json:"prefetch_flushed"`
	// WriteMismatches: blocks whose L2 parts were not their content, refused before publishing (the
	// run fails).
	WriteMismatches int64 `json:"write_mismatches"`
	// reads given up at their deadline (in read_failures)
	ReadTimeouts int64 `json:"read_timeouts"`
	// l3_prefetch consensus calls (a serving step with a candidate whose counts no step consensus
	// carried, per group; 0 at cp 1)
	PrefetchCalls int64 `json:"prefetch_calls"`
	// serving steps whose prefetch counts the step consensus before carried: no call of their own
	CountsAhead int64 `json:"counts_agreed_ahead"`
	// ChecksAhead: existence checks started a step before their request's step, off its path;
	// ChecksInStep: those its step started and waited for (the first step, or a request whose tree
	// lost part of its prefix since).
	ChecksAhead  int64 `json:"checks_ahead"`
	ChecksInStep int64 `json:"checks_in_step"`
	// from issue to the consensus that agreed it done (slowest rank)
	PrefetchWaitUs LatencyUs `json:"prefetch_wait_us"`
	// one block read, from issue to landed in the slab, queueing included (slowest rank): the
	// file's share of the wait
	ReadUs LatencyUs `json:"read_us"`
}

// NewL3 is the L3 section: the tier as config describes it (its directory, namespace, policies and
// sizes; its counts are ignored) with the counts of c.
func NewL3(config L3Report, c *Tallies) *L3Report {
	r := L3Report{
		Dir:              config.Dir,
		Namespace:        config.Namespace,
		FilesPerBlock:    config.FilesPerBlock,
		WritePolicy:      config.WritePolicy,
		PrefetchPolicy:   config.PrefetchPolicy,
		BlockTokens:      config.BlockTokens,
		Bytes:            config.Bytes,
		Writes:           c.L3Writes,
		WriteBytes:       c.L3WriteBytes,
		WriteErrors:      c.L3WriteErrors,
		WritesSkipped:    c.L3WritesSkipped,
		Reads:            c.L3Reads,
		ReadBytes:        c.L3ReadBytes,
		ReadFailures:     c.L3ReadFailures,
		Corrupt:          c.L3Corrupt,
		Evictions:        c.L3Evictions,
		Prefetches:       c.L3Prefetches,
		PrefetchBlocks:   c.L3PrefetchBlocks,
		PrefetchMisses:   c.L3PrefetchMisses,
		PrefetchTimeouts: c.L3PrefetchTimeouts,
		PrefetchFlushed:  c.L3PrefetchFlushed,
		PrefetchCalls:    c.L3PrefetchCalls,
		WriteMismatches:  c.L3WriteMismatches,
		ReadTimeouts:     c.L3ReadTimeouts,
		ChecksAhead:      c.L3ChecksAhead,
		ChecksInStep:     c.L3ChecksInStep,
		CountsAhead:      c.L3CountsAhead,
	}
	return &r
}

// writeSummary is the summary's L3 line; nothing without an L3.
func (r *L3Report) writeSummary(w io.Writer) {
	if r == nil {
		return
	}
	files := "blocks"
	if r.FilesPerBlock > 1 {
		files = fmt.Sprintf("part-files (%d a block, one a node)", r.FilesPerBlock)
	}
	skipped := ""
	if r.WritesSkipped > 0 {
		skipped = fmt.Sprintf(", %d skipped (a read-only directory)", r.WritesSkipped)
	}
	fmt.Fprintf(
		w,
		"  L3 (%s, %s, %d-token blocks): %d %s written (%.1f MiB), %d write errors%s; %d read (%.1f MiB), %d failed reads (%d corrupt); %d evicted\n",
		r.Dir,
		r.WritePolicy,
		r.BlockTokens,
		r.Writes,
		files,
		float64(r.WriteBytes)/(1<<20),
		r.WriteErrors,
		skipped,
		r.Reads,
		float64(r.ReadBytes)/(1<<20),
		r.ReadFailures,
		r.Corrupt,
		r.Evictions,
	)
	fmt.Fprintf(
		w,
		"  L3 prefetch (%s): %d prefetches of %d blocks, %d cut short by a failed read, %d timed out, %d dropped by a flush; wait p50 %.0f us, p99 %.0f us (a block read: p50 %.0f us, p99 %.0f us); %d l3_prefetch consensus calls (%d steps' counts agreed in the step consensus before); existence checks %d a step ahead, %d in their step\n",
		r.PrefetchPolicy,
		r.Prefetches,
		r.PrefetchBlocks,
		r.PrefetchMisses,
		r.PrefetchTimeouts,
		r.PrefetchFlushed,
		r.PrefetchWaitUs.P50,
		r.PrefetchWaitUs.P99,
		r.ReadUs.P50,
		r.ReadUs.P99,
		r.PrefetchCalls,
		r.CountsAhead,
		r.ChecksAhead,
		r.ChecksInStep,
	)
}
