package runner

import (
	"os"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/serving"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/pool"
)

// A pass is one replay of a workload. Beside its options (config.Options), what no command asks for
// travels apart from them: Pass, what validate asks of one of its passes, and Testing, a test's
// levers on a run, which production passes as nil. Neither is part of a job's configuration, so
// neither is in the provenance or compared across ranks; every rank of a job is given the same
// (validate's from its own replicated choices).

// Pass is what validate asks of a pass beyond its options.
type Pass struct {
	// RecordDivergence: a divergence is recorded and the group restarts from a fresh state instead
	// of failing.
	RecordDivergence bool
	// RecordFlushWrong: a flush that leaves the cache unlike a fresh one is counted for the
	// flush_reset row.
	RecordFlushWrong bool
	// FlushAtEnd: a workload without a flush gets one at the end, so that the flush_reset row has
	// one to check.
	FlushAtEnd bool
	// FailL3Reads: this rank's L3 block reads fail, as on a bad disk (the l3_roundtrip row's read
	// pass).
	FailL3Reads bool
	// L3ReadFailuresExpected: the pass's failed L3 reads are what the l3_roundtrip row counts, so
	// the first is not said as a warning (a passing validate prints no WARN).
	L3ReadFailuresExpected bool
}

// Testing is a test's levers on a run: the core's checks and deliberate bugs, slow or failing
// devices and storage, and a prefill model of its own. The zero value (and nil) changes nothing.
type Testing struct {
	// Core is the core's checks and deliberate bugs (step invariants, the eviction model, a simbugs
	// build's bugs).
	Core cache.Testing
	// SlowCopyRank slows copies on one world rank (each takes slowCopyDelay), so that the others'
	// commits come before its copies finish.
	SlowCopyRank config.Injection
	// ReserveShm replaces the slab's memory reservation (nil: fallocate), to fake a full /dev/shm.
	ReserveShm func(f *os.File, bytes int64) error
	// StagedDeviceContent fills and checks device content through WriteDevice and ReadDevice even
	// on the CPU build, as the GPU build must, so that the CPU suite covers that path.
	StagedDeviceContent bool
	// ProveReducer wraps the step consensus's transport (when there is one: --collective nccl), and
	// has it carry the consensus calls of a one-rank CP group too, which skip it otherwise: the
	// cuda build's test checks every call's reduction on the device inside a whole run at one rank.
	ProveReducer func(transport.MinAllReducer) transport.MinAllReducer
	// Prefill replaces the serving clock's model of the step costs.
	Prefill serving.Prefill
	// ServingTimings is told, on CP rank 0 of each group with the serving clock, every request's
	// way to its first token on the run's clock (none in a virtual run) and on its ideal's, in
	// the same order.
	ServingTimings func(measured, ideal []serving.Timing)
	// SlowStep adds this much real time to every step on every rank, before the step ends: a slow
	// machinery, whose steps overrun their model on the serving clock.
	SlowStep time.Duration
	// L3 is the L3 store's faults, each on the rank that sets it.
	L3 L3Faults
	// bugs are the runner's deliberate bugs (runbugs.go) for a run: a simbugs build's, set by a
	// test of this package alone (the harness sets its own on the states it builds).
	bugs runnerBugs
}

// L3Faults are a test's faults of the L3 store, each on the rank that sets it.
type L3Faults struct {
	// FailWrites fails every block write as on a full filesystem; FailReads every read as on a bad
	// disk; HideBlocks misses every block whose key is 0 mod 3 in the existence check, as on a
	// shared filesystem whose view lags; ReadOnly refuses writes, as a read-only mount does.
	FailWrites, FailReads, HideBlocks, ReadOnly bool
	// IgnoreFailedReads uses every prefetched block even when the group agreed a read failed: the
	// bug validate's L3 row exists to catch.
	IgnoreFailedReads bool
	// SlowWrites and SlowReads delay every block write or read: writes still in flight at the next
	// flush, reads not done when best_effort stops waiting.
	SlowWrites, SlowReads bool
	// CorruptGathered flips a byte of every block this rank gathers, before its check.
	CorruptGathered bool
	// HangReads holds every read until the end of the run, as a hung filesystem would: each is
	// given up at its deadline.
	HangReads bool
	// FS is the filesystem the store keeps its blocks on instead of the operating system's: the Env
	// under simulation's shared, fault-injecting l3.MemFS (envsim_fs_test.go).
	FS l3.FS
}

// The timeout policy's deadline: SGLang's defaults, a base plus a share per thousand tokens,
// capped.
const (
	prefetchTimeoutBase  = 2 * time.Second
	prefetchTimeoutPer1K = 100 * time.Millisecond
	prefetchTimeoutMax   = 30 * time.Second
)

// prefetchTimeout is how long the timeout policy waits for a prefetch of tokens tokens.
func prefetchTimeout(tokens int) time.Duration {
	return min(
		prefetchTimeoutBase+time.Duration(tokens)*prefetchTimeoutPer1K/1000,
		prefetchTimeoutMax,
	)
}

// coreConfig is the core's configuration on one rank: the cache, the step program's schedule,
// validate's modes, this rank's injected divergence, and the tests' checks.
func coreConfig(
	o *config.Options,
	pass Pass,
	t *Testing,
	g pool.Geometry,
	cpRank, group, worldRank int,
) cache.Config {
	cfg := cache.Config{
		Geometry:             g,
		DevicePages:          o.DevicePages,
		Policy:               o.Policy,
		Seed:                 o.Seed,
		CPRank:               cpRank,
		Group:                group,
		SyncCopies:           o.SyncCopies,
		FlushEvery:           o.FlushEvery,
		PlacementAssertEvery: o.PlacementAssertEvery,
		RecordDivergence:     pass.RecordDivergence,
		RecordFlushWrong:     pass.RecordFlushWrong,
		FlushAtEnd:           pass.FlushAtEnd,
		Testing:              t.Core,
	}
	if o.InjectDivergence.Set && o.InjectDivergence.Rank == worldRank {
		cfg.PerturbAtStep = o.InjectDivergence.Step
	}
	if o.L3.Enabled() {
		cfg.L3 = cache.L3Config{
			Enabled:           true,
			BlockTokens:       o.L3.BlockTokens,
			WritePolicy:       o.L3.WritePolicy,
			PrefetchPolicy:    o.L3.PrefetchPolicy,
			PrefetchThreshold: o.L3.PrefetchThreshold,
			BatchRequests:     o.StepRequestsMax(),
			IgnoreFailedReads: t.L3.IgnoreFailedReads,
		}
	}
	return cfg
}

// PassResult is what one pass leaves its caller (validate), read once the pass is over and its
// shared slab released: this rank's counters (the core's and the runner's own) and the last step it
// began, and its consensus collectives by kind. Groups gathers the report's groups from it.
type PassResult struct {
	Counters    report.Tallies // the core's and the runner's own
	Steps       int64
	Collectives []report.CollectiveStats // by kind of consensus collective
	rs          *runState
}

// RunPass replays one workload end to end with options already sized (config.Options.Size) on every
// rank of job. A failed replay returns its result too, beside the agreed error, when the pass got
// as far as its replay.
func RunPass(job *spmd.Job, opts *config.Options, pass Pass, t *Testing) (*PassResult, error) {
	rs, err := runPass(job, opts, pass, t)
	if rs == nil {
		return nil, err
	}
	r := &PassResult{Counters: rs.counters(), Steps: rs.stepsDone(), rs: rs}
	if rs.cons != nil {
		r.Collectives = rs.cons.stats[:]
	}
	return r, err
}

// Groups gathers the report's groups (World collectives that every rank calls): each CP group's
// ranks, nodes, GPUs and consensus collectives.
func (r *PassResult) Groups() ([]report.GroupReport, error) { return r.rs.gatherGroups() }
