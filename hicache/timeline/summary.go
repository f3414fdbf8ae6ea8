package timeline

import (
	"fmt"
	"math"
)

// otherData is the file's note on itself: what was kept and dropped, how the clocks were aligned,
// and each rank's time by span label over what was kept, so that a script reads the profile without
// walking the events.
type other struct {
	Format         string        `json:"format"`
	Clock          string        `json:"clock"`
	Window         windowJSON    `json:"window"`
	SpanCapPerRank int           `json:"span_cap_per_rank"`
	Note           string        `json:"note"`
	Ranks          []rankSummary `json:"ranks"`
}

type windowJSON struct {
	Steps int64 `json:"steps"` // 0: every step, up to the cap
	Every int64 `json:"every"`
}

type rankSummary struct {
	WorldRank    int   `json:"world_rank"`
	CPGroup      int   `json:"cp_group"`
	CPRank       int   `json:"cp_rank"`
	StepsKept    int64 `json:"steps_kept"`
	FirstStep    int64 `json:"first_step"`
	LastStep     int64 `json:"last_step"`
	SpansKept    int   `json:"spans_kept"`
	SpansDropped int64 `json:"spans_dropped"`
	// StreamEndStep is the step in which the workload ended: it and every later step are kept,
	// whatever the window.
	StreamEndStep int64 `json:"stream_end_step"`
	// LastIntoStepConsensus counts the kept steps in which this rank entered its group's step
	// consensus last: the steps its group waited for it.
	LastIntoStepConsensus int64              `json:"last_into_step_consensus"`
	TotalMs               map[string]float64 `json:"total_ms"`
	RunMs                 map[string]float64 `json:"run_ms,omitempty"`
}

func otherData(ranks []RankRecord, info Info) other {
	o := other{
		Format:         "cphicache run --timeline",
		Clock:          info.Clock,
		SpanCapPerRank: MaxSpansPerRank,
	}
	if len(ranks) > 0 {
		o.Window = windowJSON{ranks[0].Window.Steps, ranks[0].Window.Every}
		o.SpanCapPerRank = ranks[0].SpanCap
	}
	o.Note = fmt.Sprintf(
		"Kept: every step s with (s-1) mod %d = 0, at most %d of them (0: no bound but the cap), and everything after the "+
			"workload's last step; an asynchronous span (copy, L3 read or write) is kept when it began in a kept step. "+
			"Dropped: the other steps, and on each rank every span past its cap of %d (spans_dropped). total_ms sums each "+
			"label's spans over what was kept, per rank: spans nest (a step holds its consensus, waits and checks), so "+
			"labels overlap; run_ms is the asynchronous spans' work on their goroutine (the rest was queued). "+
			"last_into_step_consensus: the kept steps in which the rank entered its group's step consensus last (the group waited for it).",
		o.Window.Every,
		o.Window.Steps,
		o.SpanCapPerRank,
	)
	last := lastIntoStepConsensus(ranks)
	for i, rr := range ranks {
		total, run := Totals(rr)
		roundToNs(total)
		roundToNs(run)
		o.Ranks = append(
			o.Ranks,
			rankSummary{WorldRank: rr.WorldRank, CPGroup: rr.CPGroup, CPRank: rr.CPRank,
				StepsKept: rr.StepsKept, FirstStep: rr.FirstStep, LastStep: rr.LastStep, SpansKept: len(rr.Spans),
				SpansDropped: rr.Dropped, StreamEndStep: rr.StreamEndStep,
				LastIntoStepConsensus: last[i], TotalMs: total, RunMs: run},
		)
	}
	return o
}

// Label is a span's kind and, where the kind has names, its name: "consensus/step", "wait/load
// wait", "copy/backup", "l3_read".
func Label(rr *RankRecord, s Span) string {
	switch s.Kind {
	case KindConsensus, KindWait, KindCopy:
		return s.Kind.String() + "/" + rr.Names[s.Name]
	}
	return s.Kind.String()
}

// Totals sums a rank's spans by label, in milliseconds: their whole durations, and the asynchronous
// ones' runs.
func Totals(rr RankRecord) (totalMs, runMs map[string]float64) {
	totalMs, runMs = map[string]float64{}, map[string]float64{}
	for _, s := range rr.Spans {
		l := Label(&rr, s)
		totalMs[l] += float64(s.DurNs) / 1e6
		if s.Kind.Async() {
			runMs[l] += float64(s.RunDurNs) / 1e6
		}
	}
	return totalMs, runMs
}

// roundToNs keeps the file's totals at the nanosecond its times have, instead of a float's noise.
func roundToNs(ms map[string]float64) {
	for k, v := range ms {
		ms[k] = math.Round(v*1e6) / 1e6
	}
}

// lastIntoStepConsensus counts, for each rank (by index in ranks), the steps in which it entered
// its CP group's step consensus after every other rank of the group that recorded that step.
func lastIntoStepConsensus(ranks []RankRecord) []int64 {
	type groupStep struct{ group, step int64 }
	type entry struct {
		rank    int
		startNs int64
		ranks   int
	}
	latest := map[groupStep]entry{}
	for i := range ranks {
		rr := &ranks[i]
		seen := map[int64]bool{}
		for _, s := range rr.Spans {
			if s.Kind != KindConsensus || rr.Names[s.Name] != "step" || seen[s.Step] {
				continue
			}
			seen[s.Step] = true
			k := groupStep{int64(rr.CPGroup), s.Step}
			e, ok := latest[k]
			if !ok || s.StartNs > e.startNs {
				e.rank, e.startNs = i, s.StartNs
			}
			e.ranks++
			latest[k] = e
		}
	}
	counts := make([]int64, len(ranks))
	for _, e := range latest {
		if e.ranks > 1 {
			counts[e.rank]++
		}
	}
	return counts
}
