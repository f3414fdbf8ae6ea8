package serving

import "fmt"

// A run's ideal (SERVING.md's bullet on the ideal): the run's own steps again, on a clock whose
// machinery costs nothing. VirtualReplay forms its steps anew from the arrivals, as a sweep must
// (it has no run); but a clock that forms its own steps is no floor for a run's: after a step that
// overran, the run forms its next step later, with requests that arrived meanwhile, at one read of
// the weights; or it finds a step's own requests arrived and serves them with the deferred ones in
// one pass where a clock free sooner ran two (SIMSERVING.md, "Where the ideal is not a floor, and
// why"). So a run's ideal keeps the run's batches and pass shapes and takes away only what the
// machinery added: the steps' overruns, the real load-backs' lateness, and the later starts they
// caused.

// FormedStep is one step as a run formed and passed it: the records formed into it (the next
// Records of the run's record, in order: its own requests, those it deferred for their prefetch,
// or a flush) and whether it served the requests the step before deferred in a pass of their own
// (StepPlan.TwoPasses).
type FormedStep struct {
	Records   int
	TwoPasses bool
}

// ReplaySteps replays records as steps formed them, on a clock whose machinery costs nothing:
// each step holds the same records, serves the requests the step before deferred, and passes
// them as the run did; it begins when the step before it ended on this clock, and its own
// requests when the last of them arrived, if later (Take took none before it arrived). Requests
// still deferred after the last step are served in steps of their own, as the core serves them
// past the stream's end.
//
// Every step's records, hits and shape being the run's, PlanStep's times are the run's at the
// run's inputs, and PlanStep's times do not decrease as its inputs come later; every input here
// is no later than the run's: by induction over the steps, the group is free no later (the run's
// step ended at its model's end or later), the own requests may begin no later (the run took them
// once arrived), a deferred read began no later and no real load-back waits. So each pass begins,
// computes and ends no later than the run's, and every request's first token on this clock is no
// later than its first token on the run's, at the same arrival: the ideal is a floor for every
// request (FirstBelowIdeal checks it). Steps that do not match the records (more records than
// there are, fewer, or a pass of deferred requests where none was deferred) are an error.
func ReplaySteps(
	records []Record,
	steps []FormedStep,
	b Batching,
	p Prefill,
	l Links,
) (Replay, error) {
	r := newReplayer(records, b.StepTokens, p, l, func(j int) int64 { return records[j].ArrivalNs })
	i := 0
	for k, s := range steps {
		if s.Records < 0 || i+s.Records > len(records) {
			return Replay{}, fmt.Errorf(
				"step %d forms %d records after the first %d, of %d",
				k+1, s.Records, i, len(records))
		}
		if s.TwoPasses && len(r.deferred) == 0 {
			return Replay{}, fmt.Errorf(
				"step %d served deferred requests in a pass of their own, but none was deferred to it",
				k+1)
		}
		shape := ShapeOnePass
		if s.TwoPasses {
			shape = ShapeTwoPasses
		}
		r.step(i, s.Records, lastArrivalNs(records[i:i+s.Records], r.freeNs), shape)
		i += s.Records
	}
	if i != len(records) {
		return Replay{}, fmt.Errorf("the steps form %d records of %d", i, len(records))
	}
	for len(r.deferred) > 0 {
		r.step(i, 0, r.freeNs, ShapeOnePass)
	}
	return r.out, nil
}

// lastArrivalNs is when the last request of records arrived: a step of them may begin then
// (freeNs for a step of none). A flush waits for no arrival: Take forms it when it comes to the
// queue's head, arrived or not.
func lastArrivalNs(records []Record, freeNs int64) int64 {
	last, any := int64(0), false
	for _, r := range records {
		if !r.Flush {
			last, any = max(last, r.ArrivalNs), true
		}
	}
	if !any {
		return freeNs
	}
	return last
}

// FirstBelowIdeal is the first request (by index; flushes left out) for which the ideal is no
// floor: a first token later on the ideal's clock than on the measured one's, or a longer TTFT
// (the same thing at the same arrival, which ReplaySteps keeps); -1 when the ideal is a floor for
// every one. measured and ideal go with records.
func FirstBelowIdeal(records []Record, measured, ideal []Timing) int {
	for i := range records {
		if records[i].Flush {
			continue
		}
		if ideal[i].EndNs > measured[i].EndNs || ideal[i].TTFTNs() > measured[i].TTFTNs() {
			return i
		}
	}
	return -1
}
