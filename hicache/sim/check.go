package sim

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The checks at the end of a job: every rank ended as its faults say it must, nothing wrong was
// counted, and a job without timing in its outcomes matches the sequential model.

// Outcome says how a job ended.
type Outcome int

const (
	Clean      Outcome = iota // every rank ran to the end
	FailedLoud                // an injected fault ended the run, agreed by its group
	// an injected stuck copy or exit left ranks waiting: the watchdog ends such a job
	WatchdogEnd
	outcomeKinds
)

var outcomeNames = [outcomeKinds]string{"clean", "failed loudly", "ended by the watchdog"}

func (o Outcome) String() string { return outcomeNames[o] }

// finalChecks judges a job that stopped without a violation.
func (j *job) finalChecks() Outcome {
	fault := j.cfg.Fault
	fired := j.firedAt != 0
	for _, r := range j.groups[0].ranks {
		fired = fired ||
			(fault == FaultDivergence && r.cp == j.cfg.FaultRank && r.core.Step() >= j.cfg.FaultStep)
	}
	if j.stuck != "" {
		if fired && (fault == FaultStuckCopy || fault == FaultExit || fault.permanent()) {
			j.checkLiveness(WatchdogEnd)
			return WatchdogEnd
		}
		j.violate(
			nil,
			"the watchdog would end the job (a wait outlived its timeout, or no rank can move), and no injected fault explains it: "+j.stuck,
		)
		return Clean
	}
	outcome := Clean
	for _, g := range j.groups {
		for _, r := range g.ranks {
			if r.err == nil {
				continue
			}
			if g.index == 0 && fired && j.explains(r) {
				outcome = FailedLoud
				continue
			}
			j.violate(r, fmt.Sprintf("the run failed and no injected fault explains it: %v", r.err))
			return outcome
		}
	}
	// A hung L3 read is given up at its deadline, and a hung existence check may be one nobody
	// waits for; a stopped rank or a hung write never lets the job end by itself.
	if fired && outcome == Clean && fault != FaultNone && (fault != FaultFSHang || j.stalled) &&
		!j.recordlessUnseen() {
		j.violate(
			j.groups[0].ranks[j.cfg.FaultRank],
			fmt.Sprintf(
				"the injected %s at step %d ended with every rank's OK",
				fault,
				j.cfg.FaultStep,
			),
		)
		return outcome
	}
	j.checkCounters()
	j.checkCoverage()
	j.checkClocks()
	if outcome == Clean && j.violation == nil {
		j.modelChecked = j.checkModel()
	}
	return outcome
}

// explains says whether r's error is the one its group's fault must cause.
func (j *job) explains(r *rank) bool {
	var lf *cache.LocalFailure
	var peer *cache.PeerFailure
	var div *cache.DivergenceError
	switch j.cfg.Fault {
	case FaultCopyError:
		if r.cp == j.cfg.FaultRank {
			return errors.As(r.err, &lf) && lf.Code == cache.FailureCopy
		}
		return errors.As(r.err, &peer) && peer.CPRank == j.cfg.FaultRank &&
			peer.Code == cache.FailureCopy
	case FaultDivergence:
		return errors.As(r.err, &div)
	case FaultExit: // a group of one rank has nobody left waiting: its exit is the whole story
		return r.cp == j.cfg.FaultRank && errors.Is(r.err, errExited)
	}
	return false
}

// checkCounters: nothing wrong was counted on any rank.
func (j *job) checkCounters() {
	for _, g := range j.groups {
		for _, r := range g.ranks {
			c := r.core.Counters()
			switch {
			case c.Mismatches != 0, c.AuditMismatches != 0, c.L3WriteMismatches != 0:
				j.violate(
					r,
					fmt.Sprintf(
						"wrong bytes counted: %d load-back mismatches, %d audit mismatches, %d L3 block mismatches",
						c.Mismatches,
						c.AuditMismatches,
						c.L3WriteMismatches,
					),
				)
				return
			case c.Divergences != 0 && j.cfg.Fault != FaultDivergence:
				j.violate(r, fmt.Sprintf("%d divergences without an injected one", c.Divergences))
				return
			}
		}
	}
}

// checkCoverage: in every group whose ranks all ran to the end, every check that should have run
// did, as counted by the core: each rank verified every page it loaded back, and every object the
// group committed was audited on each of its nodes, every part (the audit's parts are checked as it
// runs); and in the job, every L3 block read into the slab was checked there against its key's
// content (blocks.go). A check skipped on the way (its bytes right, so no mismatch to see) shows
// only here.
func (j *job) checkCoverage() {
	j.blocks.checkCovered(j)
	nodes := int64(max(1, j.cfg.Geometry.Nodes))
	for _, g := range j.groups {
		if slices.ContainsFunc(g.ranks, func(r *rank) bool { return r.err != nil }) {
			continue
		}
		var audited int64
		for _, r := range g.ranks {
			c := r.core.Counters()
			if c.PagesLoadedBack != c.PagesChecked {
				j.violate(
					r,
					fmt.Sprintf(
						"coverage: %d pages loaded back, %d verified",
						c.PagesLoadedBack,
						c.PagesChecked,
					),
				)
				return
			}
			audited += c.AuditObjects
		}
		c := g.ranks[0].core.Counters()
		g.checkPrefetches(&c)
		g.checkVotes()
		g.checkWritten()
		if j.cfg.L3.WritePolicy == cache.L3WriteBack {
			j.models.WriteBackBlocks += int64(len(g.mustWrite))
		}
		if committed := c.BackupCommitted; audited != committed*nodes {
			j.violate(
				g.ranks[0],
				fmt.Sprintf(
					"coverage: %d objects committed over %d nodes, %d audits (one a node each)",
					committed,
					nodes,
					audited,
				),
			)
			return
		}
	}
}

// checkModel: with synchronous copies, no L3 and no fault, every request's hits by tier and the
// run's tallies are the sequential model's (model.go), on every group.
func (j *job) checkModel() (checked bool) {
	if !j.cfg.SyncCopies || j.cfg.L3.Enabled || j.cfg.Fault != FaultNone {
		return false
	}
	for _, g := range j.groups {
		m := newCacheModel(j.cfg.coreConfig(g.index, 0))
		m.run(g.all, &j.cfg, g.sent)
		r := g.ranks[0]
		if j.tamperOutcome != nil {
			j.tamperOutcome(r.outcomes)
		}
		if !j.outcomesMatch(r, m) || !j.talliesMatch(r, m) {
			return
		}
	}
	return true
}

// outcomesMatch says whether r served the requests the model m served, each with the model's hits
// by tier, reporting the first that differs.
func (j *job) outcomesMatch(r *rank, m *cacheModel) bool {
	if len(r.outcomes) != len(m.outcomes) {
		j.violate(
			r,
			fmt.Sprintf(
				"the core served %d requests, the sequential model %d",
				len(r.outcomes),
				len(m.outcomes),
			),
		)
		return false
	}
	for i, o := range r.outcomes {
		if o != m.outcomes[i] {
			j.violate(
				r,
				fmt.Sprintf(
					"request %d: the core's hits by tier %+v, the sequential model's %+v",
					i,
					o,
					m.outcomes[i],
				),
			)
			return false
		}
	}
	return true
}

// talliesMatch says whether r's core counted the tallies the model m counted, reporting them if
// not.
func (j *job) talliesMatch(r *rank, m *cacheModel) bool {
	c, want := r.core.Counters(), m.tally
	got := [...]int64{
		c.Requests,
		c.L1Evictions,
		c.L2Evictions,
		c.BackupReserved,
		c.BackupCommitted,
		c.ReserveMisses,
		c.LoadBacks,
		c.Uncached,
		c.Flushes,
	}
	exp := [...]int64{
		want.Requests,
		want.L1Evictions,
		want.L2Evictions,
		want.BackupReserved,
		want.BackupCommitted,
		want.ReserveMisses,
		want.LoadBacks,
		want.Uncached,
		want.Flushes,
	}
	if got != exp {
		j.violate(
			r,
			fmt.Sprintf(
				"tallies (requests, L1 evictions, L2 evictions, reserved, committed, misses, load-backs, uncached, flushes) %v, the sequential model's %v",
				got,
				exp,
			),
		)
		return false
	}
	return true
}
