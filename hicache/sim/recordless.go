package sim

import "fmt"

// Recordless divergences (a test's, never drawn): one rank's allocator leaks a free L2 slot with no
// record of its own in the digest (cache.Testing.PerturbStateAtStep), so only the placements that
// follow can show it. A complete digest chains every placement, so the step consensus must catch
// the first that moved; the simulator, which sees every rank, checks that no step ends with the
// group's ranks placing what they hold differently while their checks saw nothing.

// RecordlessDivergence turns a job of a group of several ranks into one whose CP rank seed%CP
// leaks a slot with no digest record after step 1 + seed%8 (a Configure for Options): the job then
// passes only if the group's own checks catch the divergence, or if it never moved a placement that
// the group still holds at the end (finalChecks compares them by the core's PlacementsHash).
func RecordlessDivergence(j *JobConfig) {
	if j.CP < 2 || j.Fault != FaultNone {
		return
	}
	j.Fault, j.Recordless = FaultDivergence, true
	j.FaultRank, j.FaultStep = int(j.Seed%uint64(j.CP)), 1+int64(j.Seed>>8%8)
}

// reportPlacements collects each rank's placements hash as it ends a step (taken then, before it
// places anything of the next) and, once every rank of the group has one, requires them alike: a
// rank that ended the step at all passed its consensus, so differing placements are a divergence
// the group's digests did not see.
func (g *group) reportPlacements(r *rank, step int64) {
	if g.placements == nil {
		g.placements = map[int64][]uint64{}
	}
	hs := append(g.placements[step], r.core.PlacementsHash(), uint64(r.cp))
	if len(hs) < 2*len(g.ranks) {
		g.placements[step] = hs
		return
	}
	delete(g.placements, step)
	for i := 2; i < len(hs); i += 2 {
		if hs[i] != hs[0] {
			g.j.violateEvenDiverged(r, fmt.Sprintf(
				"a recordless divergence went unseen: CP ranks %d and %d place the L2 objects "+
					"they hold differently at the end of step %d, and their checks passed",
				hs[1], hs[i+1], step))
			return
		}
	}
}

// recordlessUnseen says whether a recordless divergence left no trace in what group 0 holds: every
// rank's live L2 objects placed alike. The perturbation moves only the placements after it, and a
// complete digest chains each of them, so a group whose checks saw nothing must still hold equal
// placements; one that holds different ones was fooled (a digest blind to part of a placement).
func (j *job) recordlessUnseen() bool {
	if !j.cfg.Recordless {
		return false
	}
	ranks := j.groups[0].ranks
	for _, r := range ranks[1:] {
		if r.core.PlacementsHash() != ranks[0].core.PlacementsHash() {
			return false
		}
	}
	return true
}
