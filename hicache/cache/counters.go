package cache

import "reflect"

// Counters are one rank's tallies of what the core decided and did, by their agg tag (the report
// sums them over the job by it; TestEveryCounterIsAggregated holds every field to one):
//
//   - agg:"group": replicated, the same on every rank of a CP group (cache decisions): summed over
//     CP rank 0 of each.
//   - agg:"rank": this rank's own (copy bytes, verification): summed over every rank.
//   - agg:"first": validate's bookkeeping, read on each rank for its own group, never summed.
//
// The runner states them as report.Tallies, which holds every field here by name and fills the
// runner's own (its L3 I/O, the consensus calls, the ideal hits) itself; the core never writes
// those. They stay here, zero in the core, because the state hash (statehash.go) and the
// simulator's job hash walk these counters in order: a kept seed keeps its hash. A change that may
// re-record every seed's hash can take them out.
type Counters struct {
	Requests    int64 `agg:"group"`
	L1HitTokens int64 `agg:"group"`
	L2HitTokens int64 `agg:"group"`
	MissTokens  int64 `agg:"group"`
	L3HitTokens int64 `agg:"group"` // L2 hits on blocks prefetched from the L3 for them

	BackupReserved  int64 `agg:"group"`
	BackupCommitted int64 `agg:"group"`
	ReserveMisses   int64 `agg:"group"`
	L2Evictions     int64 `agg:"group"`
	L1Evictions     int64 `agg:"group"`
	LoadBacks       int64 `agg:"group"`
	Uncached        int64 `agg:"group"` // pages that could not be cached: L1 had no room
	// UncachedOversize: of those, the pages of requests with more whole pages than L1 holds, which
	// no eviction could have made room for (the others found L1's pages in use by the step or
	// pinned by copies).
	UncachedOversize int64 `agg:"group"`
	Flushes          int64 `agg:"group"`
	PlacementChecks  int64 `agg:"group"`
	Divergences      int64 `agg:"group"`
	// steps whose consensus first drained backups pinning over half of L1
	WriteThrottles int64 `agg:"group"`
	// IdealHitTokens is the replica's prompt tokens an unbounded cache would hit
	// (workload.IdealHitTokens), known on CP rank 0, which reads the workload: the report sums it
	// like the replicated counters.
	IdealHitTokens int64 `agg:"group"`

	BytesD2H int64 `agg:"rank"`
	BytesH2D int64 `agg:"rank"`
	// pages of this rank's load-backs: every one must be verified (PagesChecked)
	PagesLoadedBack int64 `agg:"rank"`
	PagesChecked    int64 `agg:"rank"`
	Mismatches      int64 `agg:"rank"`
	CopyErrs        int64 `agg:"rank"`
	AuditObjects    int64 `agg:"rank"` // committed objects audited whole (every rank's parts)
	AuditMismatches int64 `agg:"rank"` // of those, objects with a wrong byte

	// The consensus calls, from the runner's collective statistics: zero here (see above).
	ConsensusCalls     int64 `agg:"group"` // step, flush and final calls
	ConsensusStepCalls int64 `agg:"group"` // step and flush calls: those inside the steps
	ConsensusSkipped   int64 `agg:"group"` // calls skipped because the CP group has one rank
	// l3_prefetch calls: a serving step whose counts no step consensus carried
	L3PrefetchCalls int64 `agg:"group"`

	// The L3: what the group decided (replicated); each rank's I/O is the runner's
	// (report.Tallies).
	// agreed prefetches (one per request, or per prefix a step shares)
	L3Prefetches     int64 `agg:"group"`
	L3PrefetchBlocks int64 `agg:"group"` // the blocks they asked for
	L3PrefetchMisses int64 `agg:"group"` // prefetches cut short by a failed read
	// prefetches not agreed done when their request was served
	L3PrefetchTimeouts int64 `agg:"group"`
	// prefetches a flush dropped before their request was served
	L3PrefetchFlushed int64 `agg:"group"`
	// existence checks started a step before their request's step
	L3ChecksAhead int64 `agg:"group"`
	// started in it (the first step, or the tree lost part of the prefix since)
	L3ChecksInStep int64 `agg:"group"`
	// serving steps whose prefetch counts the last step consensus agreed
	L3CountsAhead int64 `agg:"group"`
	// flush consensus calls repeated because L3 block writes were still in flight
	L3FlushSettles int64 `agg:"group"`
	// objects whose blocks write_back scheduled as they neared eviction
	L3WriteBackEvicts int64 `agg:"group"`
	// The runner's L3 I/O: always zero in the core, which does none (report.Tallies carries the
	// runner's); kept here, in their place, because the simulator's job hash and the state hash
	// walk these counters in order and a kept seed keeps its hash.
	L3Writes        int64 `agg:"rank"`
	L3WriteBytes    int64 `agg:"rank"`
	L3WriteErrors   int64 `agg:"rank"`
	L3WritesSkipped int64 `agg:"rank"`
	// blocks whose L2 parts were not their content: not published, the run fails
	L3WriteMismatches int64 `agg:"rank"`
	L3Reads           int64 `agg:"rank"`
	L3ReadBytes       int64 `agg:"rank"`
	L3ReadFailures    int64 `agg:"rank"`
	L3ReadTimeouts    int64 `agg:"rank"`
	L3Corrupt         int64 `agg:"rank"`
	L3Evictions       int64 `agg:"rank"`

	// validate: the step of the first assert that caught a divergence
	DivergenceFirstStep int64 `agg:"first"`
	// flushes after which the allocator differed from a fresh one
	FlushWrong      int64 `agg:"group"`
	ObjectsCompared int64 `agg:"group"` // per-object placement comparisons across the CP group
	ObjectsWrong    int64 `agg:"group"`
}

// CounterFields lists the counters with the given agg tag, as pointers into c, in field order: the
// report's aggregation walks them instead of a hand-kept list.
func (c *Counters) CounterFields(agg string) []*int64 {
	v := reflect.ValueOf(c).Elem()
	var out []*int64
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("agg") == agg {
			out = append(out, v.Field(i).Addr().Interface().(*int64))
		}
	}
	return out
}
