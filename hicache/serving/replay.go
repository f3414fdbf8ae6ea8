package serving

import (
	"math"
	"slices"
)

// Record is one event of a replica's replay as the virtual clock replays it: a request's arrival and what its
// cache supplied, or a flush. Deferred: the request waited a step for its L3 prefetch (PlanStep), as the run
// served it.
type Record struct {
	ArrivalNs int64
	Hit       Hit
	Flush     bool
	Deferred  bool
}

// Timing is one request's way to its first token, in trace time: it arrived, waited in the queue until its step
// began (FirstStartNs), for its prefetch if deferred until the pass that served it began (StartNs), for its loads
// (L3 reads, load-backs) and then for the prefill, whose end is its first token.
type Timing struct {
	ArrivalNs, FirstStartNs, StartNs, ComputeStartNs, EndNs int64
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
// modelled time (PlanStep), a deferred request served in the step after its own. Over a run's own hit record it is
// that run's ideal; over a sweep's, its modelled TTFT.
func VirtualReplay(records []Record, b Batching, p Prefill, l Links) Replay {
	queue := make([]Queued, len(records))
	for i, r := range records {
		queue[i] = Queued{ArrivalNs: r.ArrivalNs, PromptTokens: r.Hit.PromptTokens, Flush: r.Flush}
	}
	out := Replay{Requests: make([]Timing, len(records))}
	var formNs, freeNs, deferredSince int64
	var deferred []int // the records the last step kept waiting for their prefetch
	for i := 0; i < len(records) || len(deferred) > 0; {
		// Past the last record the core gives the requests still waiting steps of their own.
		n, batchStart := 0, freeNs
		if i < len(records) {
			n, batchStart = b.Take(queue[i:], formNs)
		}
		in := StepInput{FreeNs: freeNs, BatchStartNs: batchStart, DeferredSinceNs: deferredSince}
		for _, j := range deferred {
			in.Deferred = append(in.Deferred, records[j].Hit)
		}
		var waiting []int
		for j := i; j < i+n; j++ {
			switch {
			case records[j].Flush:
			case records[j].Deferred:
				waiting = append(waiting, j)
			default:
				in.Batch = append(in.Batch, records[j].Hit)
			}
		}
		plan := PlanStep(p, l, in)
		for _, j := range deferred {
			out.Requests[j] = timing(records[j].ArrivalNs, deferredSince, plan.PassOf(true))
		}
		for j := i; j < i+n; j++ {
			out.Requests[j] = timing(records[j].ArrivalNs, plan.Batch.StartNs, plan.Batch)
		}
		deferred, deferredSince = waiting, plan.Batch.StartNs
		// The next step is formed as this one's own requests may begin: the run's CP rank 0 forms it before this
		// step runs, so it cannot know when a pass of deferred requests ends.
		formNs, freeNs = max(freeNs, batchStart), plan.EndNs()
		out.Steps++
		i += n
	}
	return out
}

// timing is a request's way through the pass that served it, its step having first begun at firstStartNs.
func timing(arrivalNs, firstStartNs int64, p Pass) Timing {
	return Timing{ArrivalNs: arrivalNs, FirstStartNs: firstStartNs, StartNs: p.StartNs, ComputeStartNs: p.ComputeStartNs, EndNs: p.EndNs}
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
