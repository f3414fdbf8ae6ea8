package sim

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/pool"
)

// Fault is one fault class a job may inject.
type Fault int

const (
	FaultNone Fault = iota
	// a rank's copy fails: the group must end with that rank's failure, agreed
	FaultCopyError
	// a rank's copy never completes: the job must end on the stuck rank's local wait
	FaultStuckCopy
	FaultDivergence // a rank's allocator is perturbed: the next consensus must catch it
	FaultExit       // a rank leaves: its peers must end waiting in a collective, not run on
	// The liveness mode's permanent faults (liveness.go); Draw never draws them.
	FaultStop // a rank stops forever, silent: its peers must end waiting, the watchdog's to name
	// the L3's reads, writes and existence checks hang forever from a step on, on every rank
	FaultFSHang
	faultKinds
)

var faultNames = [faultKinds]string{
	"none",
	"copy_error",
	"stuck_copy",
	"divergence",
	"exit",
	"stop",
	"fs_hang",
}

func (f Fault) String() string { return faultNames[f] }

// L3Faults are what a job's simulated L3 directory does wrong; none of them may change a byte
// anyone serves.
type L3Faults struct {
	FailReadPerMille   int // a read fails (EIO)
	CorruptPerMille    int // a block file is corrupt when read (flipped byte: its checksum fails)
	TruncatedPerMille  int // a block file is short
	NonRegularPerMille int // the path is a FIFO or a directory: not a block, corrupt
	// a read never returns: given up at its deadline (never under wait_complete)
	HungReadPerMille   int
	WriteErrorPerMille int // ENOSPC or EIO on a write: the block is dropped
	// one rank does not see a block that is there (a lagging shared filesystem)
	HideFromRankPerMill int
	// per step, another job evicts a block, or clears the whole namespace (rarely)
	OtherJobPerMille   int
	SharedAcrossGroups bool // the job's groups share the directory (always: one namespace)
}

// JobConfig is one simulated job: its geometry, policies, schedule, workload size and faults, all
// drawn from its seed (Draw), or set by a test.
type JobConfig struct {
	Seed     uint64
	CP, DP   int
	Geometry pool.Geometry // Geometry.Nodes: the nodes each group spans
	// ranks placed on nodes round robin, else in blocks (cache.PlaceOnNodes)
	RoundRobin  bool
	DevicePages int
	Policy      cache.WritePolicy
	Batch       int
	// StepTokens > 0 forms steps as the serving clock does (hicache/serving): what has arrived by
	// the step's simulated time, up to StepTokens prompt tokens and Batch requests; ArrivalGapNs
	// and StepNs are the mean gap between arrivals and the simulated time a step takes. 0: steps of
	// Batch requests, as without the clock.
	StepTokens           int64
	ArrivalGapNs, StepNs int64
	Requests             int
	FlushEvery           int64
	PlacementAssertEvery int64
	SyncCopies           bool
	L3                   cache.L3Config
	L3Faults             L3Faults
	Fault                Fault
	FaultRank            int   // the CP rank of group 0 the fault hits
	FaultStep            int64 // the step it hits at
	// Recordless makes a divergence fault leak a slot with no record of its own in the digest
	// (cache.Testing.PerturbStateAtStep), so that only the placements that follow can show it: set
	// by tests (RecordlessDivergence), never drawn, so every drawn job is as before.
	Recordless bool
	Bugs       cache.Bugs
	// LateTicks is how much later than usual a late completion comes; lateness is drawn per
	// completion.
	LateTicks int
	// Mode is how the job was drawn (DrawMode); Swarm what a swarm job enabled, nil for the others;
	// NoFlushEvents leaves flush events out of its workload (a swarm job's choice).
	Mode          Mode
	Swarm         *Swarm
	NoFlushEvents bool
	// Clock makes the job a serving-clock job (ModeServing, clock.go): nil in every other job.
	Clock *ClockConfig
	// TickBound, when set, replaces the scheduler ticks a job may run before it is stopped as one
	// that never ends (liveness.go's jobTickBound; tests).
	TickBound uint64
}

// Draw makes a job's configuration from its seed, within small bounds: every write and prefetch
// policy, layout, page and block size, and fault class comes up often. cp > 0 sets the CP size
// instead of drawing it.
func Draw(seed uint64, bugs cache.Bugs, cp int) JobConfig {
	j := drawCore(seed, bugs, cp)
	drawNodes(newRNG(seed^0x6e6f646573), &j)
	drawServing(newRNG(seed^0x7365727665), &j)
	drawL2Policy(seed, &j)
	return j
}

// drawCore is Draw less the nodes and the serving steps, which come from streams of their own.
func drawCore(seed uint64, bugs cache.Bugs, cp int) JobConfig {
	r := newRNG(seed ^ 0x6a6f62)
	j := JobConfig{
		Seed: seed,
		CP:   pick(r, 1, 2, 2, 3, 4, 4, 8, 8, 8),
		DP:   pick(r, 1, 1, 1, 2),
		Bugs: bugs,
	}
	if cp > 0 {
		j.CP = cp
	}
	g := pool.Geometry{
		CPSize:           j.CP,
		Layers:           r.between(1, 2),
		PayloadsPerLayer: r.between(1, 2),
		PageTokens:       pick(r, 1, 2, 4),
		TokenBytes:       8,
		Slots:            r.between(6, 48),
		Layout:           pick(r, pool.LayerFirst, pool.PageFirst),
	}
	// One to three slabs, so that objects straddle slab ends as they do in a pool of several slabs.
	g.SlabBytesMax = g.SlotBytes() * int64(max(1, (g.Slots+r.intn(3))/r.between(1, 3)))
	j.Geometry = g
	j.DevicePages = r.between(6, 40)
	j.Policy = cache.WritePolicy(r.intn(3))
	j.Batch = r.between(1, 4)
	j.Requests = r.between(12, 90)
	j.FlushEvery = pick[int64](r, 0, 0, 0, int64(r.between(2, 12)))
	j.PlacementAssertEvery = pick[int64](r, 0, int64(r.between(1, 6)))
	j.SyncCopies = r.chance(200)
	j.LateTicks = pick(r, 20, 200, 2000)
	if r.chance(650) {
		drawL3(r, &j)
		j.L3Faults = drawL3Faults(r, j.L3.PrefetchPolicy)
	}
	if r.chance(300) {
		j.Fault = Fault(r.between(1, int(FaultExit)))
		j.FaultRank, j.FaultStep = r.intn(j.CP), int64(r.between(1, 12))
		if j.Fault == FaultDivergence && j.CP == 1 {
			j.Fault = FaultNone // a one-rank group cannot diverge
		}
	}
	return j
}

// drawL3 gives the job an L3 of every write and prefetch policy, blocks of one to three pages.
func drawL3(r *rng, j *JobConfig) {
	pt := j.Geometry.PageTokens
	j.L3 = cache.L3Config{
		Enabled:     true,
		BlockTokens: pt * r.between(1, 3),
		WritePolicy: cache.L3WritePolicy(r.intn(2)),
		PrefetchPolicy: cache.PrefetchPolicy(
			r.intn(3),
		),
		PrefetchThreshold: pick(r, 0, pt),
		BatchRequests:     j.Batch,
	}
}

// drawServing gives a third of the jobs the serving clock's steps, from a stream of its own, so
// that the jobs drawn before it existed keep their configurations. Arrivals from several steps
// apart to many a step make steps of one request, of a full budget, and idle steps that wait for
// the next arrival.
func drawServing(r *rng, j *JobConfig) {
	if r.chance(333) {
		serveSteps(r, j)
	}
}

// serveSteps gives the job the serving clock's steps.
func serveSteps(r *rng, j *JobConfig) {
	pt := int64(j.Geometry.PageTokens)
	j.StepTokens = pt * int64(r.between(2, 40))
	j.Batch = r.between(1, 8)
	j.L3.BatchRequests = j.Batch
	j.StepNs = 1_000_000
	j.ArrivalGapNs = pick[int64](r, 100_000, 1_000_000, 5_000_000)
}

// drawNodes spreads each group over 1, 2 or 4 nodes (as many as divide its CP size), in blocks or
// round robin, from its own stream so that the rest of a seed's job is what it was before groups
// could span nodes.
func drawNodes(r *rng, j *JobConfig) {
	spreadOver(r, j, pick(r, 1, 1, 1, 2, 4))
}

// spreadOver spreads each group over up to nodes nodes: the most that divide its CP size.
func spreadOver(r *rng, j *JobConfig, nodes int) {
	for j.CP%nodes != 0 {
		nodes /= 2
	}
	j.SpreadOverNodes(nodes, r.chance(500))
}

// SpreadOverNodes puts each of the job's groups over nodes nodes (which must divide its CP size),
// in blocks or round robin, with the same slots a slab as on one node. Its L3 blocks are one
// part-file a node.
func (j *JobConfig) SpreadOverNodes(nodes int, roundRobin bool) {
	j.RoundRobin = roundRobin
	if nodes <= 1 {
		return
	}
	g := &j.Geometry
	slabSlots := g.SlabBytesMax / g.SlotBytes()
	g.Nodes = nodes
	g.SlabBytesMax = slabSlots * g.SlotBytes() // each node's slots are smaller
}

// placement is where each group's ranks are over its nodes.
func (j *JobConfig) placement() cache.NodePlacement {
	return cache.PlaceOnNodes(j.CP, j.Geometry.Nodes, j.RoundRobin)
}

func drawL3Faults(r *rng, policy cache.PrefetchPolicy) L3Faults {
	if r.chance(400) {
		return L3Faults{SharedAcrossGroups: true}
	}
	f := L3Faults{
		SharedAcrossGroups: true,
		FailReadPerMille:   pick(r, 0, 50),
		CorruptPerMille:    pick(r, 0, 50),
		TruncatedPerMille: pick(
			r,
			0,
			30,
		),
		NonRegularPerMille:  pick(r, 0, 20),
		WriteErrorPerMille:  pick(r, 0, 80),
		HideFromRankPerMill: pick(r, 0, 100),
		OtherJobPerMille:    pick(r, 0, 100),
	}
	if policy != cache.PrefetchWaitComplete {
		f.HungReadPerMille = pick(r, 0, 30)
	}
	return f
}

// coreConfig is rank cpRank's core configuration in group g.
func (j *JobConfig) coreConfig(group, cpRank int) cache.Config {
	p := j.placement()
	cfg := cache.Config{
		Geometry:             j.Geometry,
		DevicePages:          j.DevicePages,
		Policy:               j.Policy,
		Seed:                 j.Seed | 1,
		CPRank:               cpRank,
		Group:                group,
		GroupNode:            p.Node[cpRank],
		NodePart:             p.Part[cpRank],
		L3:                   j.L3,
		SyncCopies:           j.SyncCopies,
		FlushEvery:           j.FlushEvery,
		PlacementAssertEvery: j.PlacementAssertEvery,
		Testing: cache.Testing{
			CheckInvariants: true,
			CheckEvictions:  true,
			Bugs:            j.Bugs,
		},
	}
	if j.Fault == FaultDivergence && group == 0 && cpRank == j.FaultRank {
		if j.Recordless {
			cfg.Testing.PerturbStateAtStep = j.FaultStep
		} else {
			cfg.PerturbAtStep = j.FaultStep
		}
	}
	return cfg
}

func (j *JobConfig) String() string {
	g := j.Geometry
	l3 := "no L3"
	if j.L3.Enabled {
		l3 = fmt.Sprintf(
			"L3 %d-token blocks %s %s",
			j.L3.BlockTokens,
			j.L3.WritePolicy,
			j.L3.PrefetchPolicy,
		)
	}
	nodes := "1 node"
	if g.Nodes > 1 {
		nodes = fmt.Sprintf(
			"%d nodes (%s)",
			g.Nodes,
			map[bool]string{true: "round robin", false: "blocks"}[j.RoundRobin],
		)
	}
	policy := j.Policy.String()
	if g.Policy != pool.PolicyLRU {
		policy += ", L2 " + g.Policy.String() // LRU's jobs read as they always did
	}
	steps := ""
	if j.Clock != nil {
		steps = " (" + j.Clock.String() + ")"
	}
	if j.StepTokens > 0 {
		steps = fmt.Sprintf(
			" (serving steps: %d tokens, an arrival every %d us)",
			j.StepTokens,
			j.ArrivalGapNs/1000,
		)
	}
	return fmt.Sprintf(
		"%s: cp %d dp %d over %s, %d layers x %d payloads, %d-token pages, %d slots %s, %d device pages, %s, batch %d%s, %d requests, flush every %d, compare every %d, sync %v, %s, fault %s (rank %d step %d)",
		j.Mode,
		j.CP,
		j.DP,
		nodes,
		g.Layers,
		g.PayloadsPerLayer,
		g.PageTokens,
		g.Slots,
		g.Layout,
		j.DevicePages,
		policy,
		j.Batch,
		steps,
		j.Requests,
		j.FlushEvery,
		j.PlacementAssertEvery,
		j.SyncCopies,
		l3,
		j.faultName(),
		j.FaultRank,
		j.FaultStep,
	)
}

// faultName is the fault as the job's line names it.
func (j *JobConfig) faultName() string {
	if j.Recordless && j.Fault == FaultDivergence {
		return "divergence without a record"
	}
	return j.Fault.String()
}
