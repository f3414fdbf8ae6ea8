package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// The step broadcast of a serving-clock job: CP rank 0 forms each step on its clock and sends it
// with its earliest start, as the runner's nextStep does; every other rank decodes it. The check
// that every rank got the same batches sits here, where a rank takes its step.

// formStep is CP rank 0's side: it forms step from its queue and sends it.
func (r *rank) formStep(step int64) {
	g := r.g
	if g.sentStart == nil {
		g.sentStart, g.sentQueued = map[int64]int64{}, map[int64][]serving.Queued{}
	}
	batch, queued, startNs := r.clock.form()
	g.sent[step], g.sentStart[step], g.sentQueued[step] = batch, startNs, queued
}

// stepOnClock is what this rank gets of step: CP rank 0's batch and start, in a copy of its own
// (the core keys requests by address; an empty step is an empty batch, not the stream's end). Under
// the deliberate bug batch_from_own_queue the other ranks form their own instead, from their own
// queues and clocks, as a runner whose every rank formed steps would. Every rank's batch and start
// must be CP rank 0's.
func (r *rank) stepOnClock(step int64) []workload.Event {
	g := r.g
	batch, queued, startNs := g.sent[step], g.sentQueued[step], g.sentStart[step]
	if r.cp != 0 && cache.BugsCompiled && g.j.cfg.Bugs.Has(cache.BugBatchFromOwnQueue) {
		batch, queued, startNs = r.clock.form()
	}
	r.checkSent(step, batch, startNs)
	if batch == nil {
		return nil
	}
	own := append(make([]workload.Event, 0, len(batch)), batch...)
	r.clock.received(step, startNs, own, queued)
	return own
}

// checkSent holds the step this rank takes to the one CP rank 0 sent: its events and its start.
func (r *rank) checkSent(step int64, batch []workload.Event, startNs int64) {
	g := r.g
	if !sameBatch(batch, g.sent[step]) || startNs != g.sentStart[step] {
		g.j.violateEvenDiverged(r, fmt.Sprintf(
			"step %d's batch: CP rank %d got %s starting at %d ns, CP rank 0 sent %s starting at %d ns: every rank must get CP rank 0's",
			step, r.cp, batchNames(batch), startNs, batchNames(g.sent[step]), g.sentStart[step]))
	}
}

// sameBatch says whether two batches hold the same events in the same order (nil is the end).
func sameBatch(a, b []workload.Event) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Flush != b[i].Flush || a[i].Request.RID != b[i].Request.RID {
			return false
		}
	}
	return true
}

// batchNames names a batch's events: requests by id, flushes as such.
func batchNames(b []workload.Event) string {
	if b == nil {
		return "the stream's end"
	}
	names := make([]string, len(b))
	for i := range b {
		names[i] = "request " + b[i].Request.RID
		if b[i].Flush {
			names[i] = "a flush"
		}
	}
	return fmt.Sprint(names)
}
