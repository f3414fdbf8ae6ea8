package sim

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/bound"
	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// withPolicy makes a job's L2 run policy p.
func withPolicy(p pool.Policy) func(*JobConfig) {
	return func(j *JobConfig) { j.Geometry.Policy = p }
}

// TestKeptSeedsKeepTheirStateHashUnderLRU: every job that found a bug, run under LRU (the default),
// ends in the state hash it ended in before the L2 had policies (recorded then, at commit ac7f755),
// and so do forty jobs of seed 9: the policies cost the default nothing, to the hash. A job draws
// its policy from a stream of its own, so a job that draws LRU is this job.
func TestKeptSeedsKeepTheirStateHashUnderLRU(t *testing.T) {
	before := map[uint64]uint64{
		3547614547094447529:  0xd225237f3f7720e2,
		2980954609015642673:  0x67b09bbec626d883,
		2845627613827472915:  0xd78f8b21b608ab82,
		4084919422953816095:  0x29a16fbd103de3d1,
		17362763060051833868: 0xe8eb52c32dc4fcae,
		5247186328947336961:  0x07636669b6284a7f,
		// the serving clock's kept seeds (issue 47), recorded on its branch before policies
		3311598501016068738:  0xea573a83316f952f,
		13290486572345175640: 0xf0dba80f4ac91560,
		9136207311150588124:  0x38f3cb8e0513e5a8,
	}
	for _, s := range seedsThatFoundBugs {
		cfg := DrawMode(s.jobSeed, 0, 0, s.mode)
		withPolicy(pool.PolicyLRU)(&cfg)
		if got := RunJob(cfg).Hash; got != before[s.jobSeed] {
			t.Errorf("job seed %d under LRU: state hash %016x, before policies %016x",
				s.jobSeed, got, before[s.jobSeed])
		}
	}
	res := Run(Options{Seed: 9, Jobs: 40, Configure: withPolicy(pool.PolicyLRU)})
	if res.Hash != 0x8c12b874f74f1f52 {
		t.Errorf("seed 9, 40 jobs under LRU: state hash %016x, before policies 8c12b874f74f1f52",
			res.Hash)
	}
}

// TestEveryPolicyIsDrawnAndHeldToTheModel: jobs draw every policy, and under each one, jobs whose
// copies are synchronous serve every request as the sequential model says (model_policy.go states
// each policy plainly), with evictions, and the policies change what is served: a model that
// ignored them could not match each.
func TestEveryPolicyIsDrawnAndHeldToTheModel(t *testing.T) {
	drawn := map[pool.Policy]int{}
	for i := range 300 {
		drawn[DrawMode(JobSeed(1, i), 0, 0, ModeAll).Geometry.Policy]++
	}
	for _, name := range pool.PolicyNames() {
		if p, _ := pool.ParsePolicy(name); drawn[p] < 50 {
			t.Errorf("300 jobs drew %s %d times: %v", p, drawn[p], drawn)
		}
	}
	hits := map[pool.Policy][]int64{}
	for _, name := range pool.PolicyNames() {
		p, _ := pool.ParsePolicy(name)
		sync := func(j *JobConfig) {
			j.SyncCopies, j.L3, j.Fault, j.Geometry.Policy = true, cache.L3Config{}, FaultNone, p
		}
		res := Run(Options{Seed: 5, Jobs: 120, Configure: sync, Report: func(jr JobResult) {
			hits[p] = append(hits[p], jr.Totals.L2HitTokens)
		}})
		if res.Violation != nil {
			t.Fatalf("%s: %v", p, res.Violation)
		}
		if res.ModelChecked != res.Jobs || res.Totals.L2Evictions == 0 {
			t.Errorf("%s: %d of %d jobs compared with the model, %d L2 evictions",
				p, res.ModelChecked, res.Jobs, res.Totals.L2Evictions)
		}
	}
	for _, p := range []pool.Policy{pool.PolicySLRU, pool.PolicyAdmitSeen} {
		differ := 0
		for i := range hits[p] {
			if hits[p][i] != hits[pool.PolicyLRU][i] {
				differ++
			}
		}
		t.Logf("%s: %d of %d jobs hit the L2 otherwise than LRU", p, differ, len(hits[p]))
		if differ == 0 {
			t.Errorf("%s served every job as LRU did: the model's check of it proves little", p)
		}
	}
}

// TestNoPolicyBeatsTheOfflineBound: over drawn jobs of every policy and write policy, no job's L1
// + L2 hit tokens pass the offline bound (hicache/bound: Belady's MIN over the prefix tree) at the
// capacity of L1 and the L2 together, summed over the job's replicas; and the bound is below the
// ideal in many jobs, so that the comparison is not the ideal's. The jobs are plain ones (steps of
// Batch requests, or a third of them the serving clock's steps, as drawn) and serving-clock jobs
// (ModeServing: steps formed on a modelled clock, long prompts in chunked prefill), with no fault
// and no L3, which the bound does not cover (an L3 outlives flushes and holds more than the
// capacity: the package's doc). A job of Batch-request steps has its --flush-every flushes cut as
// the job cuts them; one whose steps the clock formed has them left out, as the runner's bound does
// with the serving clock: without a flush the bound is only higher, still a bound.
func TestNoPolicyBeatsTheOfflineBound(t *testing.T) {
	noL3 := func(j *JobConfig) { j.L3, j.Fault = cache.L3Config{}, FaultNone }
	var jobs, belowIdeal, atBound, servingSteps, clocks, chunked int
	check := func(jr JobResult) {
		j := jr.Config
		replay := workload.IdealConfig{
			PageTokens:      j.Geometry.PageTokens,
			BatchRequests:   j.Batch,
			FlushEverySteps: j.FlushEvery,
		}
		if j.StepTokens > 0 || j.Clock != nil { // steps formed from arrivals
			replay.FlushEverySteps = 0
		}
		var offline, ideal int64
		for gi := range j.DP {
			events := makeWorkload(newRNG(j.Seed^uint64(gi+1)*0x9e37), &j)
			b, err := bound.HitTokens(events, bound.Config{
				CapacityPages: j.DevicePages + j.Geometry.Slots,
				Replay:        replay,
			})
			if err != nil {
				t.Fatal(err)
			}
			offline, ideal = offline+b.HitTokens, ideal+b.IdealTokens
		}
		hits := jr.Totals.L1HitTokens + jr.Totals.L2HitTokens
		if hits > offline {
			t.Errorf("job seed %d (%s): %d hit tokens, over the offline bound %d",
				j.Seed, j.String(), hits, offline)
		}
		jobs++
		if offline < ideal {
			belowIdeal++
		}
		if hits == offline {
			atBound++
		}
		switch {
		case j.Clock != nil:
			clocks++
			if jr.Served.ChunkedRequests > 0 {
				chunked++
			}
		case j.StepTokens > 0:
			servingSteps++
		}
	}
	for _, o := range []Options{
		{Seed: 49, Jobs: 300, Mode: ModePlain, Configure: noL3, Report: check},
		{Seed: 50, Jobs: 150, Mode: ModeServing, Configure: noL3, Report: check},
	} {
		if res := Run(o); res.Violation != nil {
			t.Fatal(res.Violation)
		}
	}
	t.Logf("%d jobs (%d of the serving clock's steps, %d serving-clock jobs, %d of them with "+
		"chunked prompts): the bound below the ideal in %d, reached in %d", jobs, servingSteps,
		clocks, chunked, belowIdeal, atBound)
	if belowIdeal < jobs/10 {
		t.Errorf("the bound was below the ideal in %d of %d jobs: capacity never binds", belowIdeal,
			jobs)
	}
	if servingSteps < 50 || clocks < 100 || chunked < 20 {
		t.Errorf("%d jobs of serving steps, %d serving-clock jobs, %d chunked: too few to check "+
			"them", servingSteps, clocks, chunked)
	}
}
