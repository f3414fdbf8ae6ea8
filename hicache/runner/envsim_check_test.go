package runner

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
)

// The end-of-job checks of the runner's Env under simulation (envsim_test.go), as the simulator's
// (hicache/sim, check.go): nothing wrong counted; every fault that fired ended the job as it must
// (a hang by the watchdog of the rank that hung, naming its wait; a copy error by its group's
// agreed failure; an L3 fault not at all); and, in every group that ran to its end, coverage (pages
// loaded back = pages verified, objects committed = audits) and equal states on its ranks.

func (e *envSim) check(res *envSimResult) {
	j := e.job
	violate := func(format string, args ...any) {
		res.violations = append(res.violations, fmt.Sprintf(format, args...))
	}
	e.mu.Lock()
	res.violations = append(res.violations, e.modelViolations...) // seen first, during the job
	e.mu.Unlock()
	e.fs.mu.Lock()
	res.hidden = e.fs.hid
	e.fs.mu.Unlock()
	for world, r := range e.ranks {
		c := r.rs.core.Counters()
		if c.Mismatches != 0 || c.AuditMismatches != 0 || c.L3WriteMismatches != 0 ||
			c.Divergences != 0 {
			violate(
				"world rank %d counted something wrong: %d load-back mismatches, %d audit mismatches, %d L3 block mismatches, %d divergences",
				world,
				c.Mismatches,
				c.AuditMismatches,
				c.L3WriteMismatches,
				c.Divergences,
			)
		}
		res.loadBacks += c.PagesLoadedBack
		res.audits += c.AuditObjects
		res.reads += r.rs.io.L3Reads
		res.wrote += r.rs.io.L3Writes
		res.readsGivenUp += r.rs.io.L3ReadTimeouts
		res.auditProbes += r.env.probes
		res.writeBacks += r.env.writeBacks
	}
	res.faultFired = e.faultFired()
	e.checkOutcome(res, violate)
	for group := range j.dp {
		ranks := e.ranks[group*j.cp : (group+1)*j.cp]
		if slices.ContainsFunc(ranks, func(r *envRank) bool { return r.err != nil }) {
			continue
		}
		e.checkGroup(group, ranks, violate)
	}
}

// faultFired says whether the job's fault happened (a job may end before its n-th copy or open).
func (e *envSim) faultFired() bool {
	j := e.job
	r := e.ranks[j.faultRank]
	switch j.fault {
	case envFaultStuckCopy, envFaultStuckLoad:
		return r.engine.hungAtNs.Load() != 0
	case envFaultHungRead:
		began, _ := e.fs.hang()
		return !began.IsZero()
	case envFaultCopyError:
		return r.rs.core.Counters().CopyErrs > 0
	case envFaultL3Errors:
		return true
	}
	return false
}

// envWatchdogSlack is how long past its timeout a watchdog may end a hang, on the job's simulated
// clock: one poll of the watchdog (100 ms), and as long again for the wait that hangs to begin
// after the hang did (a backup copy that hangs is waited for at the next drain, a few jitter sleeps
// later). The clock does not move while any of the job's goroutines can run, so a loaded machine
// does not stretch it; on the real clock no such bound held.
const envWatchdogSlack = 200 * time.Millisecond

// checkOutcome: a hang that only the watchdog can end was ended by the watchdog of the rank that
// hung, naming the wait it hung in (a peer's collective would name the symptom, not the cause),
// within envWatchdogSlack past its timeout; nothing else fired a watchdog; a copy error failed its
// group, every rank of it; every other rank ended its replay cleanly.
func (e *envSim) checkOutcome(res *envSimResult, violate func(string, ...any)) {
	j := e.job
	e.mu.Lock()
	fires := slices.Clone(e.fires)
	e.mu.Unlock()
	res.endedByWatchdog = len(fires) > 0
	if len(fires) > 0 {
		_, named, _ := strings.Cut(fires[0].message, "watchdog: ")
		res.watchdogNamed, _, _ = strings.Cut(named, " on CP group")
	}
	mustFire := res.faultFired && (j.fault == envFaultStuckCopy || j.fault == envFaultStuckLoad ||
		j.fault == envFaultHungRead && j.opts.L3.PrefetchPolicy == cache.PrefetchWaitComplete)
	switch {
	case mustFire && len(fires) == 0:
		return // the bound said it: the job did not end
	case mustFire:
		f, hung := fires[0], e.hungRank()
		if f.rank != hung || strings.Contains(f.message, " consensus on ") ||
			strings.Contains(f.message, "step broadcast") {
			violate(
				"the hang on world rank %d was ended by world rank %d's watchdog, naming a collective, not the wait it hung in: %s",
				hung,
				f.rank,
				f.message,
			)
		}
		res.hangEndedAfter = f.at.Sub(e.hangBegan())
		if limit := j.opts.WatchdogTimeout; res.hangEndedAfter < limit ||
			res.hangEndedAfter > limit+envWatchdogSlack {
			violate(
				"the hang on world rank %d was ended %v after it began, on the job's clock, not within %v of the watchdog's timeout (%v)",
				hung,
				res.hangEndedAfter,
				envWatchdogSlack,
				limit,
			)
		}
		return
	case len(fires) > 0:
		violate(
			"a watchdog fired though no wait of this job should reach it (fault %v, fired %v, L3 prefetch policy %v): %s",
			j.fault,
			res.faultFired,
			j.opts.L3.PrefetchPolicy,
			fires[0].message,
		)
		return
	}
	failedGroup := -1
	if res.faultFired && j.fault == envFaultCopyError {
		failedGroup = j.faultRank / j.cp
	}
	for world, r := range e.ranks {
		switch {
		case world/j.cp == failedGroup && r.err == nil:
			violate(
				"world rank %d ended cleanly though its group's copy failed (--inject-copy-error on world rank %d)",
				world,
				j.faultRank,
			)
		case world/j.cp != failedGroup && r.err != nil:
			violate("world rank %d failed with no fault to explain it: %v", world, r.err)
		}
	}
	// A read is given up at its deadline, at most half the watchdog's timeout after it began
	// (readDeadline); a job that ended before that (best_effort does not wait for its reads) had no
	// deadline to meet.
	began, hung := e.fs.hang()
	outlived := e.endedAt.Sub(began) > j.opts.WatchdogTimeout/2+time.Second
	if res.faultFired && j.fault == envFaultHungRead && outlived &&
		e.ranks[hung].rs.io.L3ReadTimeouts == 0 {
		violate(
			"the read hung on world rank %d was not given up at its deadline (%v), and the job ran on %.1f s after it",
			hung,
			j.opts.L3.PrefetchPolicy,
			e.endedAt.Sub(began).Seconds(),
		)
	}
}

// hangBegan is when the job's hang began, on its simulated clock (zero: it did not).
func (e *envSim) hangBegan() time.Time {
	if e.job.fault == envFaultHungRead {
		began, _ := e.fs.hang()
		return began
	}
	if ns := e.ranks[e.job.faultRank].engine.hungAtNs.Load(); ns != 0 {
		return time.Unix(0, ns)
	}
	return time.Time{}
}

// hungRank is the world rank the job's hang is on: the fault's, or for a hung read the rank whose
// open hung.
func (e *envSim) hungRank() int {
	if e.job.fault == envFaultHungRead {
		_, rank := e.fs.hang()
		return rank
	}
	return e.job.faultRank
}

// checkGroup: in a group that ran to its end, every page loaded back was verified, every committed
// object was audited once on each of its nodes (as counted, and as the harness recorded it: every
// backup started), every block the write policy's model says was written, and its ranks hold the
// same state.
func (e *envSim) checkGroup(group int, ranks []*envRank, violate func(string, ...any)) {
	e.checkAudits(group, ranks, violate)
	e.checkWritten(group, violate)
	var audited int64
	for _, r := range ranks {
		c := r.rs.core.Counters()
		if c.PagesLoadedBack != c.PagesChecked {
			violate(
				"coverage: world rank %d loaded back %d pages and verified %d",
				r.rs.job.Topo.WorldRank,
				c.PagesLoadedBack,
				c.PagesChecked,
			)
		}
		audited += c.AuditObjects
	}
	nodes := int64(max(1, e.job.opts.GroupNodes))
	if committed := ranks[0].rs.core.Counters().BackupCommitted; audited != committed*nodes {
		violate(
			"coverage: group %d committed %d objects over %d node(s) and audited %d (once a node each)",
			group,
			committed,
			nodes,
			audited,
		)
	}
	for _, r := range ranks[1:] {
		if r.rs.core.StateHash() != ranks[0].rs.core.StateHash() {
			violate(
				"group %d: CP rank %d's state differs from CP rank 0's at the end",
				group,
				r.rs.job.Topo.CPRank,
			)
		}
	}
}
