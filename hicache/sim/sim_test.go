package sim

import (
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
)

// TestBoundedSimulationFindsNothing runs a fixed number of jobs from a fixed seed: the cache as it
// is must break no invariant in any of them, and the jobs must cover what the simulator is for.
func TestBoundedSimulationFindsNothing(t *testing.T) {
	res := Run(Options{Seed: 1, Jobs: 300})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if res.L3Jobs == 0 || res.FaultJobs == 0 || res.Outcomes[FailedLoud] == 0 ||
		res.Outcomes[WatchdogEnd] == 0 ||
		res.CP8Steps == 0 ||
		res.StepsOnNodes[2] == 0 ||
		res.StepsOnNodes[4] == 0 {
		t.Errorf(
			"the jobs miss a part of the space: %d with an L3, %d with a fault, outcomes %v, %d CP8 steps, steps over 2 and 4 nodes %d and %d",
			res.L3Jobs,
			res.FaultJobs,
			res.Outcomes,
			res.CP8Steps,
			res.StepsOnNodes[2],
			res.StepsOnNodes[4],
		)
	}
	c := res.Totals
	if c.L1HitTokens == 0 || c.L2HitTokens == 0 || c.L3HitTokens == 0 || c.L3PrefetchMisses == 0 ||
		c.L3PrefetchTimeouts == 0 ||
		c.L2Evictions == 0 || c.Flushes == 0 ||
		c.L3PrefetchFlushed == 0 ||
		c.L3ChecksAhead == 0 ||
		c.L3ChecksInStep == 0 ||
		c.L3CountsAhead == 0 {
		t.Errorf(
			"a path is never taken: hits L1 %d L2 %d L3 %d, %d prefetches cut short, %d timed out, %d dropped by a flush, %d L2 evictions, %d flushes, existence checks %d ahead and %d in their step, %d steps' counts agreed ahead",
			c.L1HitTokens,
			c.L2HitTokens,
			c.L3HitTokens,
			c.L3PrefetchMisses,
			c.L3PrefetchTimeouts,
			c.L3PrefetchFlushed,
			c.L2Evictions,
			c.Flushes,
			c.L3ChecksAhead,
			c.L3ChecksInStep,
			c.L3CountsAhead,
		)
	}
	t.Logf(
		"%d jobs, %d steps, outcomes %v, %d with an L3, %d with a fault, %d checked against the model",
		res.Jobs,
		res.Steps,
		res.Outcomes,
		res.L3Jobs,
		res.FaultJobs,
		res.ModelChecked,
	)
}

// TestTheSameSeedReplaysExactly: a seed is a replay, to the state hash; another seed is another
// run.
func TestTheSameSeedReplaysExactly(t *testing.T) {
	a, b, c := Run(
		Options{Seed: 9, Jobs: 40},
	), Run(
		Options{Seed: 9, Jobs: 40},
	), Run(
		Options{Seed: 10, Jobs: 40},
	)
	if a.Hash != b.Hash || a.Steps != b.Steps {
		t.Errorf(
			"seed 9 twice: hash %016x and %016x, steps %d and %d",
			a.Hash,
			b.Hash,
			a.Steps,
			b.Steps,
		)
	}
	if a.Hash == c.Hash {
		t.Errorf("seeds 9 and 10 end with the same hash %016x", a.Hash)
	}
	one := RunJob(Draw(JobSeed(9, 3), 0, 0))
	if again := RunJob(Draw(JobSeed(9, 3), 0, 0)); one.Hash != again.Hash ||
		one.Steps != again.Steps {
		t.Errorf("one job twice: hash %016x and %016x", one.Hash, again.Hash)
	}
}

// TestSynchronousJobsMatchTheSequentialModel: with every step drained, no L3 and no fault, the hits
// by tier of every request are the sequential model's; the comparison ran, and it can fail.
func TestSynchronousJobsMatchTheSequentialModel(t *testing.T) {
	sync := func(j *JobConfig) { j.SyncCopies, j.L3, j.Fault = true, cache.L3Config{}, FaultNone }
	res := Run(Options{Seed: 3, Jobs: 150, Configure: sync})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if res.ModelChecked != res.Jobs {
		t.Errorf("%d of %d jobs compared with the model", res.ModelChecked, res.Jobs)
	}
	cfg := Draw(JobSeed(3, 0), 0, 0)
	sync(&cfg)
	tampered := runJob(cfg, func(o []cache.Outcome) { o[len(o)/2].L2Hit++ })
	if tampered.Violation == nil || !strings.Contains(tampered.Violation.What, "sequential model") {
		t.Errorf("a request served differently from the model went unseen: %v", tampered.Violation)
	}
}

// seedsThatFoundBugs are jobs that once broke an invariant: each must now run clean. Add every seed
// the simulator fails on here, with what it found, once it is fixed.
var seedsThatFoundBugs = []struct {
	jobSeed uint64
	found   string
	mode    Mode // how the job was drawn (plain when not said)
}{
	{
		3547614547094447529,
		"a flush event in a step that first served prefetch-deferred requests left their nodes locked; unlocking them after the reset queued dead nodes still holding device pages, and an L1 eviction freed those pages a second time",
		ModePlain,
	},
	{
		2980954609015642673,
		"a divergence injected after step 8 (cp 3, an L3 with wait_complete) changed the diverged rank's tree, so at step 9 it alone entered the l3_prefetch call (MPI, 5 words) while its peers entered the step consensus: nothing paired, and a real job hung until the watchdog; the call is now a consensus over the step's vector and transport, and the digests in it name the divergence",
		ModePlain,
	},
	{
		2845627613827472915,
		"a block of an L3 written twice at once (cp 2 dp 2 over 2 nodes, write_back): the write policy reached a block over two tree nodes or L2 objects from each and scheduled it twice, so its writer wrote the same file twice for nothing, about one block write in a hundred; no byte went wrong, and nothing saw it until the simulator's write model (blocks.go, writesOnce); the core now schedules a block only once while its write is in flight",
		ModePlain,
	},
	{
		4084919422953816095,
		"the simulator's own provenance check (provenance.go) at first held every load-back of a prefetch's bytes to be an L3 hit; a prefetched node recomputed before its first hit (L1 could not take an earlier node's load-back) is the L2's when next loaded back, as the core counts it, so the check allowed that way (until issue 37: a Fill now names its node's L2 slots, and the check is exact)",
		ModeSwarm,
	},
	{
		17362763060051833868,
		"the provenance check made exact (a Fill names its node's L2 slots, and a recomputed prefetched node's next load-back is the L2's) at first cleared the L3 marks of every slot a Fill named; a slower rank recomputed a node of an object whose slots a faster rank had already reserved for a prefetch and read into (its own replica evicted the object only at its own prefetch), so a Fill now clears only marks of prefetches its rank has started",
		ModeSwarm,
	},
	{
		5247186328947336961,
		"the liveness rule at first required every job whose L3 hung to end by the watchdog; an L3 read that hangs under the timeout policy is given up at its deadline, and a hung existence check may be one nobody waits for, so the job ends by itself; only a stopped rank or a hung write (every write is waited for before the end) must stall it",
		ModeLiveness,
	},
	{
		3311598501016068738,
		"the serving clock's charge check at first held every pass to charge a longer cached prefix no more; a prompt alone in chunks on a step bound by its memory reads its whole cached prefix again in every chunk, so one token more cached cost 4 ns more (llama-3.1-8b, 6-token chunks): the model's physics, so the check holds one forward pass alone (TestChunkedPrefillCanChargeALongerPrefixMore)",
		ModeServing,
	},
	{
		13290486572345175640,
		"the same check: a request whose forward pass the next request's chunk fills was charged more with a longer cached prefix, for the tokens that took its room attend over a longer prefix than its own (llama-3.1-70b, 608-token chunks)",
		ModeServing,
	},
	{
		9136207311150588124,
		"the serving clock's load floor (clockcheck.go) at first held every request's prefill to start after its own L3 read, counted from the step it was first formed into; a request served in its own step (cp 3, best_effort) had an L3 hit on a node an earlier prefetch had read (a prefetched node's first load-back is the L3's, whoever's request it serves), pooled with a deferred request's read from the step before, so the clock charged its read as begun then: only a deferred request's read is its own prefetch's, and the floor holds that alone (the clock charges a read long done again in the step that first loads it: reported)",
		ModeServing,
	},
}

func TestSeedsThatFoundBugsRunClean(t *testing.T) {
	for _, s := range seedsThatFoundBugs {
		if res := RunJob(DrawMode(s.jobSeed, 0, 0, s.mode)); res.Violation != nil {
			t.Errorf("job seed %d (%s): %v", s.jobSeed, s.found, res.Violation)
		}
	}
}

// FuzzSimulatedJob draws a job from the fuzzer's seed, in the mode all and as a serving-clock job:
// every one must break no invariant (make fuzz).
func FuzzSimulatedJob(f *testing.F) {
	for _, s := range seedsThatFoundBugs {
		f.Add(s.jobSeed)
	}
	f.Add(uint64(1))
	f.Fuzz(func(t *testing.T, seed uint64) {
		for _, mode := range []Mode{ModeAll, ModeServing} {
			if res := RunJob(DrawMode(seed, 0, 0, mode)); res.Violation != nil {
				t.Fatal(res.Violation)
			}
		}
	})
}

// TestServingStepsAreSimulated: jobs whose steps the serving clock forms (by arrival and a token
// budget, CP rank 0's decision) run clean, match the sequential model when synchronous, and make
// steps of every shape: several requests, one request, and steps formed before their first request
// arrived.
func TestServingStepsAreSimulated(t *testing.T) {
	serve := func(j *JobConfig) {
		pt := int64(j.Geometry.PageTokens)
		j.StepTokens, j.Batch, j.L3.BatchRequests, j.StepNs, j.ArrivalGapNs = 40*pt, 4, 4, 1_000_000, 600_000
		j.SyncCopies, j.L3, j.Fault = true, cache.L3Config{}, FaultNone
	}
	res := Run(Options{Seed: 11, Jobs: 60, Configure: serve})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if res.ModelChecked != res.Jobs {
		t.Errorf("%d of %d jobs compared with the model", res.ModelChecked, res.Jobs)
	}
	// The shapes of the steps one such job forms.
	cfg := Draw(JobSeed(11, 0), 0, 0)
	serve(&cfg)
	events := makeWorkload(newRNG(cfg.Seed^1*0x9e37), &cfg)
	arrive(events, &cfg, 0)
	sizes := map[string]int{}
	for step := int64(1); ; step++ {
		b := cfg.takeStep(&events, step)
		if b == nil {
			break
		}
		switch {
		case b[0].Flush:
		case len(b) > 1:
			sizes["several"]++
		case b[0].Request.ArrivalNs > (step-1)*cfg.StepNs:
			sizes["waited for an arrival"]++
		default:
			sizes["one"]++
		}
	}
	if sizes["several"] == 0 || sizes["one"] == 0 || sizes["waited for an arrival"] == 0 {
		t.Errorf("the serving steps of one job: %v, want every shape", sizes)
	}
}

// TestSometimesEveryBranchIsReached: the bounded run takes every interesting branch (sometimes.go),
// and the report names them, with NEVER for a branch a run did not take.
func TestSometimesEveryBranchIsReached(t *testing.T) {
	res := Run(Options{Seed: 1, Jobs: 300})
	if res.Violation != nil {
		t.Fatal(res.Violation)
	}
	if never := res.Unreached(); len(never) > 0 {
		t.Errorf("300 jobs from seed 1 never took %v; reached %v", never, res.Reached)
	}
	report := strings.Join(res.SometimesReport(), "\n")
	if !strings.Contains(report, "a capacity miss in the L2") ||
		strings.Contains(report, "NEVER") != (len(res.Unreached()) > 0) {
		t.Errorf("report:\n%s", report)
	}
	none := Run(
		Options{Seed: 1, Jobs: 3, Configure: func(j *JobConfig) { j.L3 = cache.L3Config{} }},
	)
	if r := strings.Join(none.SometimesReport(), "\n"); !strings.Contains(r, "NEVER") {
		t.Errorf("jobs without an L3 reached every L3 branch:\n%s", r)
	}
}
