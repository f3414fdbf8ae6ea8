package report

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cphicache/cphicache/hicache/sizing"
)

// Percentiles are a distribution's p50, p90 and p99, in seconds, each its nearest rank's histogram
// bucket's upper bound (at most 2% high: MsQuantiles), and its exact mean. Means add up where
// percentiles do not: the mean TTFT is the sum of its parts' means.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
}

// PercentilesOf are q's p50, p90, p99 and mean.
func PercentilesOf(q *MsQuantiles) Percentiles {
	return Percentiles{
		P50:  q.Seconds(0.50),
		P90:  q.Seconds(0.90),
		P99:  q.Seconds(0.99),
		Mean: q.MeanSeconds(),
	}
}

// ServingReport is the serving clock's result over every CP group, in trace time. Every figure in
// it is MODELLED: the prefill, the load-backs and the L3 reads cost what the model and the link
// rates say; what the cache machinery added beyond them was measured on this machine, in its real
// time (SERVING.md).
type ServingReport struct {
	Model     string  `json:"model"` // the prefill model and the rates, as the summary names them
	TimeScale float64 `json:"time_scale"`
	// BreakEven says, for a few prefix lengths, the KV rate a tier must deliver to beat
	// recomputing, beside the L2's host link and the L3's read rate (modelled).
	BreakEven []string `json:"break_even,omitempty"`
	// Virtual: the replay kept its own pace and only the ideal was replayed (sweep): no measured
	// figures.
	Virtual  bool  `json:"virtual,omitempty"`
	Requests int64 `json:"requests"`
	// TTFT is each request's time to first token: from its arrival to the end of the step that
	// computed it.
	TTFT Percentiles `json:"ttft_s"`
	// IdealTTFT is the same requests' with a machinery that costs nothing: a run's own steps again
	// (the same batches and passes, arrivals and hits: serving.ReplaySteps), a floor for every
	// request, which the run checks; a virtual run's steps formed anew (serving.VirtualReplay).
	IdealTTFT Percentiles `json:"ideal_ttft_s"`
	// MeasuredOverIdealP50 is TTFT p50 over IdealTTFT p50: both are modelled, so it is the cache
	// machinery's cost on the modelled clock, as the summary names it. The report writes it as
	// machinery_cost_p50 and, for the scripts that read it before it was named so, as
	// measured_over_ideal_p50 too (MarshalJSON).
	MeasuredOverIdealP50 float64 `json:"measured_over_ideal_p50"`
	// The parts of a TTFT, which add up to it request by request (so their means to the mean
	// TTFT): the queue until its step began, the step it waited for its L3 prefetch, the wait for
	// its loads before the compute, and the compute to its first token (the modelled prefill to
	// the end of its last chunk's forward pass, then what the step's real work overran the model
	// by). Overrun is that last share alone, a part of Compute.
	QueueWait    Percentiles `json:"queue_wait_s"`
	PrefetchWait Percentiles `json:"prefetch_wait_s"`
	LoadWait     Percentiles `json:"load_wait_s"`
	Compute      Percentiles `json:"compute_s"`
	Overrun      Percentiles `json:"overrun_s"`
	// Prompt tokens per second: each group's prompt tokens over the span from its first arrival to
	// its last first token, summed over the groups.
	PromptTokensPerSecond      float64 `json:"prompt_tokens_per_s"`
	IdealPromptTokensPerSecond float64 `json:"ideal_prompt_tokens_per_s"`
	// ModelledL3 is a virtual replay's (sweep's) figures again with an unbounded L3 under the L2
	// (the runner's servingl3.go).
	ModelledL3 *ModelledL3Serving `json:"modelled_l3,omitempty"`
	// Load is a virtual replay's (sweep's) load beside what the group serves, and the replicas a
	// TTFT target takes (the runner's servingload.go).
	Load *ServingLoad `json:"load,omitempty"`
	// PerRankCopies is a run's ideal again as the design the shared L2 replaces would serve its
	// hits (the runner's replayPerRank), with a model and more than one rank a group.
	PerRankCopies *PerRankServing `json:"per_rank_copies,omitempty"`
	// MachinerySharePct is the share of the steps' time that the cache machinery added beyond the
	// modelled time.
	MachinerySharePct float64 `json:"machinery_share_pct"`
	// Chunked prefill (MODELLED): at most ChunkTokens new tokens a forward pass (--step-tokens);
	// ChunkedRequests were computed in more than one, ChunkedForwardPasses in all (the run's, or
	// a virtual run's ideal's).
	ChunkTokens          int64 `json:"chunk_tokens"`
	ChunkedRequests      int64 `json:"chunked_requests"`
	ChunkedForwardPasses int64 `json:"chunked_forward_passes"`

	// TTFTHist and IdealHist are TTFT's and IdealTTFT's distributions job-wide, for the metrics
	// file's histograms.
	TTFTHist, IdealHist MsQuantiles `json:"-"`
}

// writeSummary says what the cache bought, every number labelled as modelled.
func (s *ServingReport) writeSummary(w io.Writer) {
	if s == nil {
		return
	}
	if s.Virtual {
		fmt.Fprintf(
			w,
			"  serving, MODELLED on a virtual clock (%s): %d requests, TTFT p50 %s, p90 %s, p99 %s, %.0f prompt tokens/s\n",
			s.Model,
			s.Requests,
			seconds(s.IdealTTFT.P50),
			seconds(s.IdealTTFT.P90),
			seconds(s.IdealTTFT.P99),
			s.IdealPromptTokensPerSecond,
		)
		if l := s.ModelledL3; l != nil {
			fmt.Fprintf(
				w,
				"    with an unbounded L3 read at %s/s (MODELLED, %d tokens from it): TTFT p50 %s, p99 %s, %.0f prompt tokens/s\n",
				sizing.FormatBytes(
					int64(l.ReadBytesPerSecond),
				),
				l.L3Tokens,
				seconds(l.TTFT.P50),
				seconds(l.TTFT.P99),
				l.PromptTokensPerSecond,
			)
		}
		s.writeChunks(w)
		return
	}
	ms := func(p Percentiles) string {
		return fmt.Sprintf("p50 %s, p90 %s, p99 %s", seconds(p.P50), seconds(p.P90), seconds(p.P99))
	}
	fmt.Fprintf(
		w,
		"  serving clock, MODELLED (%s; trace time, modelled time spent %gx faster): %d requests, %.0f prompt tokens/s (ideal %.0f)\n",
		s.Model,
		s.TimeScale,
		s.Requests,
		s.PromptTokensPerSecond,
		s.IdealPromptTokensPerSecond,
	)
	fmt.Fprintf(
		w,
		"    TTFT %s; ideal (this run's own steps again, the same hits, a machinery that costs nothing: a floor for every request) %s; the machinery's cost on the modelled clock (TTFT over ideal) p50 %.2fx\n",
		ms(s.TTFT),
		ms(s.IdealTTFT),
		s.MeasuredOverIdealP50,
	)
	s.PerRankCopies.writeSummary(w)
	for _, line := range s.BreakEven {
		fmt.Fprintf(w, "    %s\n", line)
	}
	s.writeParts(w)
	s.writeChunks(w)
}

// writeParts gives the means of a TTFT's parts, which add up to the mean TTFT (the p50s of the
// parts would not: the median request's queue and the median request's compute are two requests').
func (s *ServingReport) writeParts(w io.Writer) {
	fmt.Fprintf(
		w,
		"    mean TTFT %s = queue %s + L3 prefetch wait %s + load wait %s + compute %s (the means of a TTFT's parts, which add up; of the compute, the steps' real work beyond the model %s); the cache machinery added %.1f%% of the steps' time beyond the model\n",
		seconds(s.TTFT.Mean),
		seconds(s.QueueWait.Mean),
		seconds(s.PrefetchWait.Mean),
		seconds(s.LoadWait.Mean),
		seconds(s.Compute.Mean),
		seconds(s.Overrun.Mean),
		s.MachinerySharePct,
	)
}

// writeChunks says how many requests chunked prefill split, when it split any.
func (s *ServingReport) writeChunks(w io.Writer) {
	if s.ChunkedRequests == 0 {
		return
	}
	fmt.Fprintf(
		w,
		"    chunked prefill, MODELLED: %d of %d requests computed in chunks of at most %d new tokens (--step-tokens), %d forward passes in all, each attending over the chunks before it; a first token comes at its last chunk's end\n",
		s.ChunkedRequests,
		s.Requests,
		s.ChunkTokens,
		s.ChunkedForwardPasses,
	)
}

// MarshalJSON writes the report with MeasuredOverIdealP50 under its name, machinery_cost_p50,
// beside its old key.
func (s ServingReport) MarshalJSON() ([]byte, error) {
	// the same fields without this method, which json.Marshal would call again
	type fields ServingReport
	return json.Marshal(struct {
		fields
		MachineryCostP50 float64 `json:"machinery_cost_p50"`
	}{fields(s), s.MeasuredOverIdealP50})
}

// seconds prints a time in the unit that reads best, a zero with its unit ("load wait 0 s").
func seconds(s float64) string {
	switch {
	case s == 0:
		return "0 s"
	case s < 1e-3:
		return fmt.Sprintf("%.0f us", s*1e6)
	case s < 1:
		return fmt.Sprintf("%.1f ms", s*1e3)
	default:
		return fmt.Sprintf("%.2f s", s)
	}
}

// ttftBoundsSeconds are the metrics file's TTFT histogram bounds: 10 ms to about 3 minutes, by
// factors of 2.
var ttftBoundsSeconds = prometheus.ExponentialBuckets(0.01, 2, 15)

// constHistogram is m as a Prometheus histogram over bounds: each of m's buckets (2% wide) counts
// under the first bound at or above its upper edge, so a count may sit one bound high by at most 2%
// of its time.
func (m *MsQuantiles) constHistogram(
	desc *prometheus.Desc,
	bounds []float64,
	labels ...string,
) prometheus.Metric {
	perBound := make([]uint64, len(bounds)+1)
	perBound[0] = uint64(m.zeros)
	for i, n := range m.q.counts {
		upperSeconds := quantileFloorUs * math.Pow(quantileRatio, float64(i)) / 1e3
		perBound[sort.SearchFloat64s(bounds, upperSeconds)] += uint64(n)
	}
	buckets := make(map[float64]uint64, len(bounds))
	var cumulative uint64
	for i, bound := range bounds {
		cumulative += perBound[i]
		buckets[bound] = cumulative
	}
	return prometheus.MustNewConstHistogram(
		desc,
		cumulative+perBound[len(bounds)],
		float64(m.sumNs)/1e9,
		buckets,
		labels...)
}

// ModelledL3Serving is a virtual replay's figures with the modelled L3 under its L2 (MODELLED).
type ModelledL3Serving struct {
	ReadBytesPerSecond float64 `json:"read_bytes_per_s"` // one node's
	BlockTokens        int64   `json:"block_tokens"`
	// prompt tokens the L3 supplied, of those computed without it
	L3Tokens int64 `json:"l3_tokens"`
	// HeldTokens is what the L3 holds at the end, every whole block of a prompt written once: the
	// L3 that holds all the trace writes
	HeldTokens            int64       `json:"held_tokens"`
	TTFT                  Percentiles `json:"ttft_s"`
	PromptTokensPerSecond float64     `json:"prompt_tokens_per_s"`
}

// ServingLoad is a virtual replay's load (MODELLED): the trace's demand beside the group's capacity
// at the replay's hits, in prompt tokens a second, the queue's share of the mean TTFT, and the DP
// replicas whose split of the requests brings the TTFT p50 under the target.
type ServingLoad struct {
	// prompt tokens over the span of their arrivals (0 with closed-loop clients)
	DemandPromptTokensPerSecond float64 `json:"demand_prompt_tokens_per_s"`
	// prompt tokens over the group's busy time: what it serves when never idle
	CapacityPromptTokensPerSecond float64 `json:"capacity_prompt_tokens_per_s"`
	// the mean queue wait over the mean TTFT
	QueueShareOfMeanTTFT float64 `json:"queue_share_of_mean_ttft"`
	TTFTTargetSeconds    float64 `json:"ttft_target_s"`
	// the fewest replicas, of every number from 1 to ReplicasMax, whose TTFT p50 meets the target
	// (0: none did), and that p50 (at ReplicasMax when none did): an estimate at the group's hits,
	// the caches not replayed split (serving.ReplicasFor)
	Replicas        int     `json:"replicas"`
	ReplicasTTFTP50 float64 `json:"replicas_ttft_p50_s"`
	ReplicasMax     int     `json:"replicas_max"`
}

// PerRankServing is a run's requests on the ideal's clock with per-rank copies' loads: each GPU
// loading a hit's whole KV over its own link, at the run's own hits and steps, so never sooner than
// the ideal (MODELLED). It models the loads alone: the design keeps whole copies on each GPU and
// in each rank's pool, 1/cp of the tokens of the same bytes in L1 and L2, which would hit less, and
// a run cannot replay its cache at that size (sweep --l2-design does).
type PerRankServing struct {
	TTFT Percentiles `json:"ttft_s"`
}

// writeSummary is the run's line on per-rank copies, when it has one.
func (p *PerRankServing) writeSummary(w io.Writer) {
	if p == nil {
		return
	}
	fmt.Fprintf(
		w,
		"    beside per-rank copies (the design the shared L2 replaces), MODELLED at this run's hits and steps: TTFT p50 %s, p90 %s, p99 %s: their loads alone, each GPU loading a hit's whole KV over its own link; not their hits: whole copies on each GPU and in each rank's pool hold 1/cp of the tokens in L1 and L2 and would hit less, which a run cannot replay (sweep --l2-design both does)\n",
		seconds(p.TTFT.P50),
		seconds(p.TTFT.P90),
		seconds(p.TTFT.P99),
	)
}
