package serving

import (
	"math"
	"slices"
)

// Record is one event of a replica's replay as the virtual clock replays it: a request's arrival and what its
// cache supplied, or a flush.
type Record struct {
	ArrivalNs int64
	Hit       Hit
	Flush     bool
}

// Timing is one request's way to its first token, in trace time: it arrived, waited in the queue until its step
// began, waited for its loads (L3 reads, load-backs) and then for the prefill, whose end is its first token.
type Timing struct {
	ArrivalNs, StartNs, ComputeStartNs, EndNs int64
}

// TTFTNs is the request's time to first token.
func (t Timing) TTFTNs() int64 { return t.EndNs - t.ArrivalNs }

// Replay is a virtual replay's outcome: every request's timing, in the order of the records, and its steps.
type Replay struct {
	Requests []Timing
	Steps    int
}

// FormNextAtStart is the rule both clocks form steps by: the batch of step k+1 is formed as step k begins, from
// the requests queued by then, while step k's compute runs (as SGLang's overlap scheduler prepares the next batch
// during the forward pass), and step k+1 begins when step k ends, or at its first request's arrival if later. The
// runner forms it so because its core reads the event stream one step ahead (for the L3's existence checks).
//
// VirtualReplay replays records on a clock whose cache machinery costs nothing: each step takes exactly its
// modelled cost (Cost). Over a run's own hit record it is that run's ideal; over a sweep's, its modelled TTFT.
func VirtualReplay(records []Record, b Batching, p Prefill, l Links) Replay {
	queue := make([]Queued, len(records))
	for i, r := range records {
		queue[i] = Queued{ArrivalNs: r.ArrivalNs, PromptTokens: r.Hit.PromptTokens, Flush: r.Flush}
	}
	out := Replay{Requests: make([]Timing, len(records))}
	var prevStart, prevEnd int64
	var hits []Hit
	for i := 0; i < len(records); {
		n, start := b.Take(queue[i:], prevStart)
		start = max(start, prevEnd)
		hits = hits[:0]
		for _, r := range records[i : i+n] {
			if !r.Flush {
				hits = append(hits, r.Hit)
			}
		}
		cost := Cost(p, l, hits)
		computeStart := start + Nanoseconds(cost.L3ReadSeconds+cost.LoadSeconds)
		end := computeStart + Nanoseconds(cost.PrefillSeconds)
		for j := i; j < i+n; j++ {
			out.Requests[j] = Timing{ArrivalNs: records[j].ArrivalNs, StartNs: start, ComputeStartNs: computeStart, EndNs: end}
		}
		prevStart, prevEnd = start, end
		out.Steps++
		i += n
	}
	return out
}

// Nanoseconds converts modelled seconds to nanoseconds of trace time, rounded up: a cost is never free.
func Nanoseconds(seconds float64) int64 { return int64(math.Ceil(seconds * 1e9)) }

// Summary is a replay's serving figures over its requests (flushes left out).
type Summary struct {
	Requests                  int
	TTFTP50, TTFTP90, TTFTP99 float64 // seconds
	PromptTokensPerSecond     float64 // prompt tokens over the span from the first arrival to the last first token
}

// Summarize reads a replay's figures. records and timings go together.
func Summarize(records []Record, timings []Timing) Summary {
	ttft := make([]int64, 0, len(timings))
	var prompt, first, last int64
	first = math.MaxInt64
	for i, t := range timings {
		if records[i].Flush {
			continue
		}
		ttft = append(ttft, t.TTFTNs())
		prompt += records[i].Hit.PromptTokens
		first, last = min(first, t.ArrivalNs), max(last, t.EndNs)
	}
	s := Summary{Requests: len(ttft)}
	if len(ttft) == 0 {
		return s
	}
	slices.Sort(ttft)
	s.TTFTP50, s.TTFTP90, s.TTFTP99 = quantileSeconds(ttft, 0.50), quantileSeconds(ttft, 0.90), quantileSeconds(ttft, 0.99)
	if span := last - first; span > 0 {
		s.PromptTokensPerSecond = float64(prompt) / (float64(span) / 1e9)
	}
	return s
}

// quantileSeconds is the q-quantile of sorted nanoseconds (the nearest rank), in seconds.
func quantileSeconds(sorted []int64, q float64) float64 {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return float64(sorted[min(max(i, 0), len(sorted)-1)]) / 1e9
}
