package sim

import (
	"strconv"

	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/workload"
)

// makeWorkload draws one replica's events: multi-turn conversations that share a few system prompts
// (so prefixes are shared, nodes split and L1 and L2 fill and evict), some with a partial last
// page, and now and then a flush.
func makeWorkload(r *rng, j *JobConfig) []workload.Event {
	pt := j.Geometry.PageTokens
	next := int32(1)
	fresh := func(pages int) []int32 {
		out := make([]int32, pages*pt)
		for i := range out {
			out[i] = next
			next++
		}
		return out
	}
	prompts := make([][]int32, r.between(1, 4))
	for i := range prompts {
		prompts[i] = fresh(r.between(1, 6))
	}
	conversations := make([][]int32, r.between(2, 8))
	for i := range conversations {
		conversations[i] = append([]int32(nil), prompts[r.intn(len(prompts))]...)
	}
	events := make([]workload.Event, 0, j.Requests+4)
	for len(events) < j.Requests {
		if r.chance(30) && !j.NoFlushEvents {
			events = append(events, workload.Event{Flush: true})
			continue
		}
		c := r.intn(len(conversations))
		if len(conversations[c]) > 24*pt || r.chance(100) { // a new conversation
			conversations[c] = append([]int32(nil), prompts[r.intn(len(prompts))]...)
		}
		conversations[c] = append(conversations[c], fresh(r.between(1, 4))...)
		ids := conversations[c]
		if r.chance(200) && pt > 1 { // a partial last page, never cached
			ids = append(ids[:len(ids):len(ids)], next)
			next++
		}
		events = append(
			events,
			workload.Event{
				Request: workload.Request{
					RID:       strconv.Itoa(len(events)),
					InputIDs:  ids,
					OutputLen: 1,
				},
			},
		)
	}
	return events
}

// arrive gives a group's events the serving clock's arrivals (StepTokens > 0): a Poisson stream
// from the job's seed and the group's index, the same on every rank, as CP rank 0 holds them in a
// run.
func arrive(events []workload.Event, j *JobConfig, group int) {
	if j.StepTokens == 0 || len(events) == 0 {
		return
	}
	at := serving.PoissonArrivalsNs(
		len(events),
		1e9/float64(j.ArrivalGapNs),
		j.Seed^uint64(group+1)*0x61727269,
	)
	for i := range events {
		events[i].Request.ArrivalNs = at[i]
	}
}

// takeStep forms step `step` of a group's events, as CP rank 0 does in a run: up to Batch requests,
// or with the serving clock's steps what has arrived by the step's simulated time (StepNs a step)
// up to StepTokens prompt tokens (serving.Batching). The sequential model forms its steps by the
// same function.
func (j *JobConfig) takeStep(events *[]workload.Event, step int64) []workload.Event {
	if j.StepTokens == 0 {
		return workload.TakeBatch(events, j.Batch)
	}
	ev := *events
	queue := make([]serving.Queued, min(len(ev), j.Batch+1))
	for i := range queue {
		queue[i] = serving.Queued{
			ArrivalNs:    ev[i].Request.ArrivalNs,
			PromptTokens: ev[i].Request.PromptTokens(),
			Flush:        ev[i].Flush,
		}
	}
	n, _ := serving.Batching{
		StepTokens:  j.StepTokens,
		MaxRequests: j.Batch,
	}.Take(
		queue,
		(step-1)*j.StepNs,
	)
	*events = ev[n:]
	if n == 0 {
		return nil
	}
	return ev[:n]
}
