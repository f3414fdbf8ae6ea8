package report

import "reflect"

// Tallies are one rank's tallies as the report states them, each field tagged with how the report
// sums it over the job (agg "group": a CP group's replicated value, counted once per group; "rank":
// a rank's own, summed over every rank; "first": validate's). The runner fills them from the core's
// counters (cache.Counters: every field of those is here, by the same name and tag, which the
// runner's tests hold) and adds its own: the L3 store's I/O, the consensus calls and the ideal
// hits. The report never reads the core itself.
type Tallies struct {
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
	// (workload.IdealHitTokens), known on CP rank 0, which reads the workload: summed like the
	// replicated counters.
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

	// The consensus calls, from the runner's collective statistics.
	ConsensusCalls     int64 `agg:"group"` // step, flush and final calls
	ConsensusStepCalls int64 `agg:"group"` // step and flush calls: those inside the steps
	ConsensusSkipped   int64 `agg:"group"` // calls skipped because the CP group has one rank
	// l3_prefetch calls: a serving step whose counts no step consensus carried
	L3PrefetchCalls int64 `agg:"group"`

	// The L3: what the group decided (replicated, the core's), and each rank's I/O (the runner's
	// and its store's: its writer or reader share).
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
	L3Writes          int64 `agg:"rank"` // block files published
	L3WriteBytes      int64 `agg:"rank"`
	// blocks dropped on a failed write (ENOSPC, EIO): the run went on
	L3WriteErrors   int64 `agg:"rank"`
	L3WritesSkipped int64 `agg:"rank"` // blocks not written: the directory is read-only
	// blocks whose L2 parts were not their content: not published, the run fails
	L3WriteMismatches int64 `agg:"rank"`
	L3Reads           int64 `agg:"rank"` // blocks read and verified into the L2
	L3ReadBytes       int64 `agg:"rank"`
	// reads that failed (absent, corrupt, I/O error, past their deadline): misses
	L3ReadFailures int64 `agg:"rank"`
	L3ReadTimeouts int64 `agg:"rank"` // of those, reads still running at their deadline
	// block files that failed their checks (removed, never served)
	L3Corrupt   int64 `agg:"rank"`
	L3Evictions int64 `agg:"rank"` // block files removed to keep --l3-bytes

	// validate: the step of the first assert that caught a divergence
	DivergenceFirstStep int64 `agg:"first"`
	// flushes after which the allocator differed from a fresh one
	FlushWrong      int64 `agg:"group"`
	ObjectsCompared int64 `agg:"group"` // per-object placement comparisons across the CP group
	ObjectsWrong    int64 `agg:"group"`
}

// Fields lists the tallies with the given agg tag, as pointers into t, in field order: the report's
// aggregation walks them instead of a hand-kept list.
func (t *Tallies) Fields(agg string) []*int64 {
	v := reflect.ValueOf(t).Elem()
	var out []*int64
	for i := range v.NumField() {
		if v.Type().Field(i).Tag.Get("agg") == agg {
			out = append(out, v.Field(i).Addr().Interface().(*int64))
		}
	}
	return out
}
