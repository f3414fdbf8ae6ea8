package bench

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/cphicache/cphicache/hicache/sizing"
)

// replayBlockHeaderBytes is a block file's header (hicache/l3's format): the plain files of the
// prefetch reference are block files' size, header included.
const replayBlockHeaderBytes = 64

// measurePrefetchPlainRead times the plain read of the bytes one prefetch of the filled runs read,
// on average: their blocks read / prefetches agreed, rounded (at least 1), each a file of their
// mean block file size, in a fresh directory under the L3's parent (the same filesystem), read
// whole one after the other from the page cache. The median of cfg.PlainRounds rounds, after one
// untimed round. Zero when the filled runs read nothing.
func measurePrefetchPlainRead(
	cfg ReplayConfig,
	runs []ReplayRun,
) (ref ReplayPrefetchRef, err error) {
	var reads, readBytes, prefetches int64
	for _, r := range runs {
		if r.Config == ReplayL3Filled && r.L3 != nil {
			reads, readBytes, prefetches = reads+r.L3.Reads, readBytes+r.L3.ReadBytes, prefetches+r.L3.Prefetches
		}
	}
	if reads == 0 || prefetches == 0 {
		return ref, nil
	}
	ref.Blocks = max(1, int(math.Round(float64(reads)/float64(prefetches))))
	ref.BlockFileBytes = replayBlockHeaderBytes + readBytes/reads
	ref.Rounds = cfg.PlainRounds
	dir, err := os.MkdirTemp(cfg.L3Parent, "cphicache-bench-replay-plain-*")
	if err != nil {
		return ref, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(dir)) }()
	payload, into := make([]byte, ref.BlockFileBytes), make([]byte, ref.BlockFileBytes)
	fillPattern(payload, uint64(ref.BlockFileBytes))
	fillPattern(into, 1)
	paths := make([]string, ref.Blocks)
	for i := range paths {
		paths[i] = filepath.Join(dir, fmt.Sprintf("%016x.ref", i))
		if err := writeRefFile(paths[i], payload, false); err != nil {
			return ref, err
		}
	}
	var rounds []float64
	for round := range 1 + cfg.PlainRounds { // round 0 is not timed
		start := time.Now()
		for _, p := range paths {
			if n, err := readRefFile(p, into); err != nil {
				return ref, err
			} else if n != len(into) {
				return ref, fmt.Errorf("bench replay: %s: read %d of %d bytes", p, n, len(into))
			}
		}
		if round > 0 {
			rounds = append(rounds, time.Since(start).Seconds()*1e3)
		}
	}
	ref.PlainReadMs = median(rounds)
	return ref, nil
}

var replayTable = table{
	{
		"config",
		"",
		"%s",
		10,
	}, {"runs", "", "%d", 4}, {"ttft-p50", "(s)", "%s", 9}, {"/L2-only", "(x)", "%s", 8},
	{"ttft-p99", "(s)", "%s", 9}, {"tokens/s", "", "%s", 9}, {"machinery", "(x)", "%s", 9},
	{"wall", "(s)", "%.2f", 8}, {"/L2-only", "(x)", "%s", 8},
	{
		"computed",
		"(%)",
		"%.1f",
		8,
	}, {"hits", "(%)", "%.1f", 6}, {"l3-write", "(MB)", "%s", 9}, {"l3-read", "(MB)", "%s", 9},
	{"pf-p50", "(ms)", "%s", 8}, {"pf-p99", "(ms)", "%s", 8}, {"#wrong", "", "%d", 6},
}

// ratioText is a ratio to 3 significant digits: a filled L3's TTFT can be a few thousandths of the
// L2-only one's, which two decimals printed as 0.00.
func ratioText(v float64) string { return sizing.Significant(v, 3) }

// servingCells are a row's serving clock columns, "-" without the clock.
func servingCells(r ReplayRow) []any {
	if r.TTFTP50Seconds == 0 {
		return []any{"-", "-", "-", "-", "-"}
	}
	return []any{
		fmt.Sprintf("%.3f", r.TTFTP50Seconds),
		ratioText(r.TTFTOverL2Only),
		fmt.Sprintf("%.3f", r.TTFTP99Seconds),
		fmt.Sprintf("%.0f", r.PromptTokensPerSecond),
		ratioText(r.MeasuredOverIdeal),
	}
}

// WriteReplayTable prints the rows, then the ratios against their targets: the modelled TTFT's on
// the serving clock, otherwise the walls' and the prefetch waits' against a plain read.
func WriteReplayTable(w io.Writer, res *ReplayResult) {
	fmt.Fprintln(
		w,
		"# medians over runs; ttft = time to first token, MODELLED on the serving clock (trace time), machinery = TTFT over the ideal's (the same hits with a machinery that costs nothing), both MODELLED: the cache machinery's cost on the modelled clock; computed = prompt tokens that missed every tier; hits = L1 + L2 + L3; pf = prefetch wait, issue to agreement (slowest rank)",
	)
	replayTable.writeHeader(w)
	for _, r := range res.Rows {
		replayTable.writeRow(w, replayRowCells(r)...)
	}
	if res.row(ReplayL2Only).TTFTP50Seconds > 0 {
		// On the serving clock its targets replace the walls': a wall there is mostly the modelled
		// time spent.
		writeModelledTargets(w, res)
		return
	}
	writeWallTargets(w, res.Ratios)
	writePrefetchTargets(w, res.Ratios, res.Prefetch)
}

// replayRowCells are one row's cells in replayTable's order: its configuration and runs, the
// serving clock's columns, the wall and its ratio, the computed and hit shares, the L3 columns
// and the #wrong count.
func replayRowCells(r ReplayRow) []any {
	cells := append([]any{r.Config, r.Runs}, servingCells(r)...)
	cells = append(cells, r.WallSeconds, ratioText(r.WallOverL2Only), r.ComputedPct, r.HitPct)
	cells = append(cells, l3Cells(r)...)
	return append(cells, r.Wrong)
}

// l3Cells are a row's L3 columns, the MB written and read and the prefetch wait's p50 and p99 in
// ms, "-" for a configuration without an L3, which has none of them to show.
func l3Cells(r ReplayRow) []any {
	if !r.hasL3 {
		return []any{"-", "-", "-", "-"}
	}
	return []any{
		fmt.Sprintf("%.0f", r.L3WriteBytes/1e6),
		fmt.Sprintf("%.0f", r.L3ReadBytes/1e6),
		fmt.Sprintf("%.2f", r.PrefetchWaitP50Ms),
		fmt.Sprintf("%.2f", r.PrefetchWaitP99Ms),
	}
}

// targetText says whether the ratio v met its goal (at most goal); a ratio of 0 or less is one
// that could not be measured, and says so rather than passing.
func targetText(v, goal float64) string {
	switch {
	case v <= 0:
		return "not measured"
	case v <= goal:
		return "met"
	}
	return "not met"
}

// writeModelledTargets prints the serving clock's targets: the L3 runs' modelled TTFT p50 over the
// L2-only one's, and each configuration's TTFT over its ideal's, the machinery's modelled cost.
func writeModelledTargets(w io.Writer, res *ReplayResult) {
	ra := res.Ratios
	fmt.Fprintf(
		w,
		"# MODELLED TTFT p50, L3-filled / L2-only: %s (target <= %.2f: %s)\n",
		ratioText(ra.TTFTFilledOverL2Only),
		ReplayTargetTTFTFilled,
		targetText(ra.TTFTFilledOverL2Only, ReplayTargetTTFTFilled),
	)
	fmt.Fprintf(
		w,
		"# MODELLED TTFT p50, L3-empty / L2-only: %s (target <= %.2f: %s)\n",
		ratioText(ra.TTFTEmptyOverL2Only),
		ReplayTargetTTFTEmpty,
		targetText(ra.TTFTEmptyOverL2Only, ReplayTargetTTFTEmpty),
	)
	for _, r := range res.Rows {
		fmt.Fprintf(
			w,
			"# %s machinery cost on the modelled clock, TTFT p50 over ideal: %s (target <= %.2f: %s)\n",
			r.Config,
			ratioText(r.MeasuredOverIdeal),
			ReplayTargetOverIdeal,
			targetText(r.MeasuredOverIdeal, ReplayTargetOverIdeal),
		)
	}
}

// writeWallTargets prints the L3 runs' walls over the L2-only run's against their targets, the
// targets of a run without the serving clock.
func writeWallTargets(w io.Writer, ra ReplayRatios) {
	fmt.Fprintf(
		w,
		"# L3-empty / L2-only wall: %s (target <= %.1f: %s)\n",
		ratioText(ra.EmptyOverL2Only),
		ReplayTargetEmpty,
		targetText(ra.EmptyOverL2Only, ReplayTargetEmpty),
	)
	fmt.Fprintf(
		w,
		"# L3-filled / L2-only wall: %s (target <= %.1f: %s)\n",
		ratioText(ra.FilledOverL2Only),
		ReplayTargetFilled,
		targetText(ra.FilledOverL2Only, ReplayTargetFilled),
	)
}

// writePrefetchTargets prints the plain read of one prefetch's bytes (ref), or that the filled runs
// read none, then each L3 configuration's prefetch wait p99 over it against its target: what the
// prefetch costs beyond reading the same bytes.
func writePrefetchTargets(w io.Writer, ra ReplayRatios, ref ReplayPrefetchRef) {
	if ref.PlainReadMs > 0 {
		fmt.Fprintf(
			w,
			"# one prefetch of the filled runs reads %d blocks of %d bytes (file): a plain read of them takes %.3f ms (median of %d, page cache)\n",
			ref.Blocks,
			ref.BlockFileBytes,
			ref.PlainReadMs,
			ref.Rounds,
		)
	} else {
		fmt.Fprintln(w, "# the filled runs read no L3 block: no prefetch to compare with a plain read")
	}
	for _, p := range []struct {
		config string
		v      float64
	}{{ReplayL3Empty, ra.EmptyP99OverPlainRead}, {ReplayL3Filled, ra.FilledP99OverPlainRead}} {
		fmt.Fprintf(
			w,
			"# %s prefetch wait p99 / plain read: %s (target <= %.1f: %s)\n",
			p.config,
			ratioText(p.v),
			ReplayTargetPrefetch,
			targetText(p.v, ReplayTargetPrefetch),
		)
	}
}

// ReplayWrong sums the #wrong column.
func ReplayWrong(res *ReplayResult) int64 {
	var n int64
	for _, r := range res.Rows {
		n += r.Wrong
	}
	return n
}

// SummarizeReplay takes each configuration's medians and the wall ratios against L2 only (NaN
// without it).
func SummarizeReplay(runs []ReplayRun) *ReplayResult {
	res := &ReplayResult{Runs: runs}
	for _, config := range replayConfigs {
		if row := summarizeReplayConfig(runs, config); row.Runs > 0 {
			res.Rows = append(res.Rows, row)
		}
	}
	setL2OnlyRatios(res)
	return res
}

// replaySamples are one configuration's figures, run by run, whose medians make its row: the
// serving clock's and the L3's only from the runs that had them.
type replaySamples struct {
	wall, computed, hit, written, read, p50, p99 []float64
	ttft50, ttft99, tokens, overIdeal            []float64
}

// add takes run r's figures, its serving clock's when it had one and its L3's when it had one.
func (s *replaySamples) add(r ReplayRun) {
	s.wall = append(s.wall, r.WallSeconds)
	s.computed = append(s.computed, r.ComputedPct)
	s.hit = append(s.hit, r.HitPct)
	if sv := r.Serving; sv != nil {
		s.ttft50, s.ttft99 = append(s.ttft50, sv.TTFT.P50), append(s.ttft99, sv.TTFT.P99)
		s.tokens = append(s.tokens, sv.PromptTokensPerSecond)
		s.overIdeal = append(s.overIdeal, sv.MeasuredOverIdealP50)
	}
	if r.L3 != nil {
		s.written = append(s.written, float64(r.L3.WriteBytes))
		s.read = append(s.read, float64(r.L3.ReadBytes))
		s.p50 = append(s.p50, r.L3.PrefetchWaitUs.P50/1e3)
		s.p99 = append(s.p99, r.L3.PrefetchWaitUs.P99/1e3)
	}
}

// summarizeReplayConfig is config's row: its runs and #wrong summed, its figures' medians; a row
// of no runs (and no medians, which an empty sample has none of) when none of runs is config's.
func summarizeReplayConfig(runs []ReplayRun, config string) ReplayRow {
	row := ReplayRow{Config: config}
	var s replaySamples
	for _, r := range runs {
		if r.Config != config {
			continue
		}
		row.Runs++
		row.Wrong += r.Wrong
		if r.L3 != nil {
			row.hasL3 = true
		}
		s.add(r)
	}
	if row.Runs == 0 {
		return row
	}
	row.WallSeconds, row.ComputedPct, row.HitPct = median(s.wall), median(s.computed), median(s.hit)
	if len(s.ttft50) > 0 {
		row.TTFTP50Seconds, row.TTFTP99Seconds = median(s.ttft50), median(s.ttft99)
		row.PromptTokensPerSecond, row.MeasuredOverIdeal = median(s.tokens), median(s.overIdeal)
	}
	if row.hasL3 {
		row.L3WriteBytes, row.L3ReadBytes = median(s.written), median(s.read)
		row.PrefetchWaitP50Ms, row.PrefetchWaitP99Ms = median(s.p50), median(s.p99)
	}
	return row
}

// setL2OnlyRatios sets each row's wall and TTFT p50 over the L2-only row's, and the L3 rows' as
// the result's ratios: 0 (not measured) for any without an L2-only row to divide by.
func setL2OnlyRatios(res *ReplayResult) {
	base, baseTTFT := res.row(ReplayL2Only).WallSeconds, res.row(ReplayL2Only).TTFTP50Seconds
	for i := range res.Rows {
		res.Rows[i].WallOverL2Only = ratio(res.Rows[i].WallSeconds, base)
		res.Rows[i].TTFTOverL2Only = ratio(res.Rows[i].TTFTP50Seconds, baseTTFT)
	}
	res.Ratios.TTFTEmptyOverL2Only = ratio(res.row(ReplayL3Empty).TTFTP50Seconds, baseTTFT)
	res.Ratios.TTFTFilledOverL2Only = ratio(res.row(ReplayL3Filled).TTFTP50Seconds, baseTTFT)
	res.Ratios.EmptyOverL2Only = ratio(res.row(ReplayL3Empty).WallSeconds, base)
	res.Ratios.FilledOverL2Only = ratio(res.row(ReplayL3Filled).WallSeconds, base)
}

// row is the configuration's row; a zero row when it has none.
func (r *ReplayResult) row(config string) ReplayRow {
	for _, row := range r.Rows {
		if row.Config == config {
			return row
		}
	}
	return ReplayRow{Config: config}
}

// ratio is a / b, or 0 (not measured: JSON has no NaN) when either is not a positive finite number.
func ratio(a, b float64) float64 {
	v := a / b
	if !(a > 0) || !(b > 0) || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0
	}
	return v
}
