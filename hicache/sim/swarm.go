package sim

import (
	"fmt"
	"strings"

	"github.com/cphicache/cphicache/hicache/cache"
)

// Modes of drawing jobs. Swarm testing (Groce et al., "Swarm Testing", ISSTA 2012; FoundationDB's
// and TigerBeetle's simulators do the same): a job that may suffer every fault at once rarely goes
// deep into any one of them, since one fault ends it or masks another, so each swarm job enables a
// random subset of the fault kinds and of the features, some jobs with no fault at all, some with
// exactly one kind. The liveness mode gives each job one permanent fault (liveness.go) and checks
// that it ends, within the watchdog's bound, as the watchdog ends a real job. Each mode's choices
// come from streams of their own, so a job seed's plain configuration is what it was before the
// modes existed, and a job seed with its mode replays exactly.

// Mode says how jobs are drawn.
type Mode int

const (
	// Draw alone: at most one core fault, the L3's faults all drawn together
	ModePlain    Mode = iota
	ModeSwarm         // a random subset of the features and fault kinds on each job
	ModeLiveness      // one permanent fault each: a rank that stops, a filesystem that hangs
	// plain jobs on the serving clock (clock.go): CP rank 0 forms the steps on a modelled clock,
	// and each group's record is replayed on the ideal's
	ModeServing
	ModeAll // each job's mode drawn from its seed: plain, swarm or liveness
	modeKinds
)

var modeNames = [modeKinds]string{"plain", "swarm", "liveness", "serving", "all"}

func (m Mode) String() string { return modeNames[m] }

// ParseMode reads a mode's name.
func ParseMode(s string) (Mode, error) {
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("%q is not one of %s", s, strings.Join(modeNames[:], ", "))
}

// DrawMode draws a job in a mode. ModeAll draws the job's own mode first, from its seed: plain and
// swarm two fifths of the jobs each, liveness a fifth.
func DrawMode(seed uint64, bugs cache.Bugs, cp int, mode Mode) JobConfig {
	if mode == ModeAll {
		mode = pick(
			newRNG(seed^0x6d6f6465),
			ModePlain,
			ModePlain,
			ModeSwarm,
			ModeSwarm,
			ModeLiveness,
		)
	}
	var j JobConfig
	switch mode {
	case ModeSwarm:
		j = drawCore(seed, bugs, cp)
		drawSwarm(newRNG(seed^0x737761726d), &j)
		drawL2Policy(seed, &j)
	case ModeLiveness:
		j = Draw(seed, bugs, cp)
		drawLiveness(newRNG(seed^0x6c697665), &j)
	case ModeServing:
		j = Draw(seed, bugs, cp)
		drawClock(newRNG(seed^0x636c6f636b), &j)
	default:
		j = Draw(seed, bugs, cp)
	}
	j.Mode = mode
	return j
}

// Feature is one thing a swarm job turns on or off.
type Feature int

const (
	FeatL3           Feature = iota // an L3 tier
	FeatAsyncCopies                 // copies complete asynchronously (off: every step drained)
	FeatServingSteps                // steps formed by the serving clock's batching
	FeatFlushEvents                 // flush events in the workload
	FeatFlushEvery                  // a flush every few steps
	FeatCompare                     // an object-by-object placement comparison every few steps
	FeatNodes                       // CP groups over several nodes
	FeatDP2                         // two CP groups
	featureKinds
)

var featureNames = [featureKinds]string{
	"L3",
	"async copies",
	"serving steps",
	"flush events",
	"flush every",
	"object compare",
	"over nodes",
	"DP 2",
}

func (f Feature) String() string { return featureNames[f] }

// SwarmFault is one fault kind a swarm job may enable: the core's (one fires per job) and the L3
// directory's.
type SwarmFault int

const (
	SwCopyError SwarmFault = iota
	SwStuckCopy
	SwDivergence
	SwExit
	SwFailRead
	SwCorrupt
	SwTruncated
	SwNonRegular
	SwHungRead
	SwWriteError
	SwLaggingView
	SwOtherJob
	swarmFaultKinds
)

var swarmFaultNames = [swarmFaultKinds]string{
	"copy error",
	"stuck copy",
	"divergence",
	"exit",
	"failed read",
	"corrupt block",
	"short block",
	"non-regular block",
	"hung read",
	"write error",
	"lagging view",
	"another job",
}

func (f SwarmFault) String() string { return swarmFaultNames[f] }

// Swarm is what a swarm job enabled (after what its configuration allows: no L3 fault without an
// L3, no divergence in a group of one rank, no hung read under wait_complete).
type Swarm struct {
	Features [featureKinds]bool
	Faults   [swarmFaultKinds]bool
}

// Count is how many fault kinds the job enabled.
func (s *Swarm) Count() int {
	n := 0
	for _, on := range s.Faults {
		if on {
			n++
		}
	}
	return n
}

// drawSwarm turns each feature on or off by a coin, then enables no fault kind (a quarter of the
// jobs), exactly one (a quarter) or each with a chance of a third.
func drawSwarm(r *rng, j *JobConfig) {
	s := &Swarm{}
	drawSwarmFeatures(r, j, s)
	drawSwarmFaults(r, j, s)
	drawSwarmL3Rates(r, j, s)
	j.Swarm = s
}

// drawSwarmFeatures tosses each of s's features and configures j as they say, turning the nodes
// feature off again where the group fits one node.
func drawSwarmFeatures(r *rng, j *JobConfig, s *Swarm) {
	for f := range s.Features {
		s.Features[f] = r.chance(500)
	}
	// Each choice below draws its value whether or not its feature is on (map[bool]: the value, or
	// zero), so that the stream's later draws do not depend on the coins.
	j.SyncCopies = !s.Features[FeatAsyncCopies]
	j.NoFlushEvents = !s.Features[FeatFlushEvents]
	j.FlushEvery = map[bool]int64{true: int64(r.between(2, 12))}[s.Features[FeatFlushEvery]]
	j.PlacementAssertEvery = map[bool]int64{true: int64(r.between(1, 6))}[s.Features[FeatCompare]]
	j.DP = map[bool]int{true: 2, false: 1}[s.Features[FeatDP2]]
	if s.Features[FeatServingSteps] {
		serveSteps(r, j)
	}
	j.L3, j.L3Faults = cache.L3Config{}, L3Faults{}
	if s.Features[FeatL3] {
		drawL3(r, j)
		j.L3Faults.SharedAcrossGroups = true
	}
	if s.Features[FeatNodes] {
		spreadOver(r, j, pick(r, 2, 4))
		s.Features[FeatNodes] = j.Geometry.Nodes > 1 // a group of one rank spans one node
	}
}

// swarmFaultPossible says whether j's configuration allows fault kind f: a divergence needs a
// group of more than one rank, the L3's faults an L3, and a hung read a policy that gives up.
func swarmFaultPossible(j *JobConfig, f SwarmFault) bool {
	switch {
	case f == SwDivergence:
		return j.CP > 1
	case f == SwHungRead:
		return j.L3.Enabled && j.L3.PrefetchPolicy != cache.PrefetchWaitComplete
	case f >= SwFailRead:
		return j.L3.Enabled
	}
	return true
}

// drawSwarmFaults enables s's fault kinds (none, one, or each by a chance of a third), keeps those
// j allows, and draws one of the enabled core faults, with its rank and step, as j's fault.
func drawSwarmFaults(r *rng, j *JobConfig, s *Swarm) {
	switch r.intn(4) {
	case 0:
	case 1:
		s.Faults[r.intn(int(swarmFaultKinds))] = true
	default:
		for f := range s.Faults {
			s.Faults[f] = r.chance(333)
		}
	}
	var core []Fault
	for f := range s.Faults {
		s.Faults[f] = s.Faults[f] && swarmFaultPossible(j, SwarmFault(f))
		if s.Faults[f] && SwarmFault(f) <= SwExit {
			core = append(core, Fault(f+1))
		}
	}
	j.Fault = FaultNone
	if len(core) > 0 {
		j.Fault = core[r.intn(len(core))]
		j.FaultRank, j.FaultStep = r.intn(j.CP), int64(r.between(1, 12))
	}
}

// drawSwarmL3Rates draws each L3 fault kind's rate in per mille, 0 for a kind s left off. Each
// draws its rate whether or not it is on, in the order of the kinds, so that the stream does not
// depend on the faults.
func drawSwarmL3Rates(r *rng, j *JobConfig, s *Swarm) {
	rate := func(f SwarmFault) int { return map[bool]int{true: pick(r, 20, 50, 100)}[s.Faults[f]] }
	l := &j.L3Faults
	l.FailReadPerMille = rate(SwFailRead)
	l.CorruptPerMille = rate(SwCorrupt)
	l.TruncatedPerMille = rate(SwTruncated)
	l.NonRegularPerMille = rate(SwNonRegular)
	l.HungReadPerMille = rate(SwHungRead)
	l.WriteErrorPerMille = rate(SwWriteError)
	l.HideFromRankPerMill = rate(SwLaggingView)
	l.OtherJobPerMille = rate(SwOtherJob)
}

// swarmCoverage counts, over a run's swarm jobs, how many had each feature and each fault kind on,
// and how many had no fault or exactly one kind.
type swarmCoverage struct {
	Jobs, NoFault, OneFault int
	Features                [featureKinds]int
	Faults                  [swarmFaultKinds]int
}

func (c *swarmCoverage) add(s *Swarm) {
	if s == nil {
		return
	}
	c.Jobs++
	for f, on := range s.Features {
		if on {
			c.Features[f]++
		}
	}
	for f, on := range s.Faults {
		if on {
			c.Faults[f]++
		}
	}
	switch s.Count() {
	case 0:
		c.NoFault++
	case 1:
		c.OneFault++
	}
}

// report is the swarm lines of the sometimes report: each feature and fault kind with the jobs that
// had it on, NEVER for one no swarm job had.
func (c *swarmCoverage) report() []string {
	if c.Jobs == 0 {
		return nil
	}
	row := func(name string, n int) string {
		if n == 0 {
			return name + " NEVER"
		}
		return fmt.Sprintf("%s %d", name, n)
	}
	var feats, faults []string
	for f, n := range c.Features {
		feats = append(feats, row(Feature(f).String(), n))
	}
	for f, n := range c.Faults {
		faults = append(faults, row(SwarmFault(f).String(), n))
	}
	return []string{
		fmt.Sprintf(
			"  swarm (%d jobs: %d with no fault, %d with exactly one fault kind), jobs with each on:",
			c.Jobs,
			c.NoFault,
			c.OneFault,
		),
		"    features: " + strings.Join(feats, ", "),
		"    faults: " + strings.Join(faults, ", "),
	}
}
