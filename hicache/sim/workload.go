package sim

import (
	"strconv"

	"github.com/cphicache/cphicache/hicache/workload"
)

// makeWorkload draws one replica's events: multi-turn conversations that share a few system prompts (so prefixes
// are shared, nodes split and L1 and L2 fill and evict), some with a partial last page, and now and then a flush.
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
		if r.chance(30) {
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
		events = append(events, workload.Event{Request: workload.Request{RID: strconv.Itoa(len(events)), InputIDs: ids, OutputLen: 1}})
	}
	return events
}
