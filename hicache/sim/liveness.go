package sim

import (
	"fmt"
	"strings"
)

// Liveness: the simulated watchdog, and the liveness mode's permanent faults.
//
// A real rank arms the watchdog around every wait (a collective, the step broadcast, a local drain)
// and exits with status 3 (spmd.ExitWatchdog) once one wait outlives --watchdog-timeout, naming
// what it waited on. The simulator's watchdog does the same in scheduler ticks: a rank blocked in
// one wait for longer than watchdogTicks ends the job, and so does a job in which nothing can move
// any more (it fires watchdogTicks after the first rank of those still blocked began to wait). A
// job that ends so must have an injected fault that explains it (a stuck copy, an exit, a stopped
// rank, a hung filesystem); a job that never ends (a rank that spins: it runs, but no wait lasts
// long enough for a watchdog to see) is stopped at jobTickBound and is a violation too.
//
// The liveness mode (ModeLiveness) gives every job one permanent fault, drawn after its plain
// configuration: a rank that stops forever at a step (silent: it neither leaves nor answers), or an
// L3 whose reads, writes and existence checks hang forever from a step on, on every rank. Once a
// rank stopped or a write hung (every write is waited for before the end), the job must end by the
// watchdog (exit status 3) within liveBoundTicks, with a line that names what every rank still
// running waited on, the stopped rank as silent. A hung read is given up at its deadline (under
// wait_complete it hangs), and a hung existence check may be one nobody waits for: the job may then
// end by itself.

// watchdogTicks is the simulated --watchdog-timeout: far longer than any wait of a job that runs
// well (a late completion comes at most LateTicks, a hung read is given up at 4 LateTicks), far
// shorter than a job.
func (j *JobConfig) watchdogTicks() uint64 { return uint64(64*j.LateTicks + 20000) }

// liveBoundTicks bounds a permanent fault's end: the watchdog's timeout, once the last rank still
// moving blocked, which it does within a step or so.
func (j *JobConfig) liveBoundTicks() uint64 { return 4 * j.watchdogTicks() }

// jobTickBound stops a job that runs forever without ending: a generous bound on its scheduler
// ticks (or TickBound, when a test sets one).
func (j *JobConfig) jobTickBound() uint64 {
	if j.TickBound > 0 {
		return j.TickBound
	}
	return uint64(j.Requests+8)*uint64(j.CP*j.DP+4)*2000 + 64*j.watchdogTicks()
}

// ExitStatus is the exit status a real run of the job would end with: 0 clean, 1 a failure (an
// injected fault caught and agreed), 3 the watchdog (spmd.ExitWatchdog).
func (o Outcome) ExitStatus() int {
	return [outcomeKinds]int{Clean: 0, FailedLoud: 1, WatchdogEnd: 3}[o]
}

// drawLiveness replaces the job's faults with one permanent fault: a rank that stops, or (half the
// time) a hanging L3, which gets the job an L3 when it has none.
func drawLiveness(r *rng, j *JobConfig) {
	j.Fault, j.L3Faults = FaultStop, L3Faults{SharedAcrossGroups: true}
	if r.chance(500) {
		j.Fault = FaultFSHang
		if !j.L3.Enabled {
			drawL3(r, j)
		}
	}
	j.FaultRank, j.FaultStep = r.intn(j.CP), int64(r.between(1, 12))
}

// permanent says whether the job's fault is one the liveness mode injects.
func (f Fault) permanent() bool { return f == FaultStop || f == FaultFSHang }

// stopsAt says whether r stops forever as step begins (FaultStop).
func (r *rank) stopsAt(step int64) bool {
	j := &r.g.j.cfg
	return j.Fault == FaultStop && r.g.index == 0 && r.cp == j.FaultRank && step == j.FaultStep
}

// hangs says whether L3 work r starts now never completes (FaultFSHang: every rank, from its step
// on).
func (r *rank) hangs() bool {
	j := &r.g.j.cfg
	return j.Fault == FaultFSHang && r.core.Step() >= j.FaultStep
}

// fired records that the job's injected fault took effect on r, and when.
func (r *rank) fired() {
	if j := r.g.j; j.firedAt == 0 {
		j.firedAt = j.now
	}
}

// watchdog ends the job when a rank has waited in one wait longer than the watchdog's timeout, as a
// real rank's watchdog would; it says whether it did.
func (j *job) watchdog(all []*rank) bool {
	limit := j.cfg.watchdogTicks()
	for _, r := range all {
		if r.blocked() && j.now-r.since > limit {
			j.endAt = j.now
			j.noteStuck(all)
			return true
		}
	}
	return false
}

// blocked says whether the rank sits in a wait (the watchdog's armed slots).
func (r *rank) blocked() bool {
	return r.state == stBcast || r.state == stColl || r.state == stWait || r.state == stStopped
}

// noteStuck records the watchdog's line when not every rank finished: what each rank still running
// waits on. When nothing can move, the watchdog fires its timeout after the earliest wait of those
// still blocked began.
func (j *job) noteStuck(all []*rank) {
	var blocked []string
	first := uint64(0)
	for _, r := range all {
		if r.state == stFinished {
			continue
		}
		if first == 0 || r.since < first {
			first = r.since
		}
		blocked = append(
			blocked,
			fmt.Sprintf(
				"group %d rank %d %s at step %d",
				r.g.index,
				r.cp,
				r.waitingOn(),
				r.core.Step(),
			),
		)
	}
	if len(blocked) > 0 {
		j.stuck = strings.Join(blocked, "; ")
		if j.endAt == 0 {
			j.endAt = first + j.cfg.watchdogTicks()
		}
	}
}

// waitingOn names what a blocked rank waits on, as its watchdog line does.
func (r *rank) waitingOn() string {
	switch r.state {
	case stBcast:
		return fmt.Sprintf("in the step broadcast of step %d", r.bcastStep)
	case stColl:
		return fmt.Sprintf("in the %s collective", r.coll.Kind)
	case stWait:
		return fmt.Sprintf("in a local wait, %s (%s)", r.waitReason.Name, r.waitReason.Hint)
	case stStopped:
		return "silent (stopped: it answers nothing)"
	}
	return stateNames[r.state]
}

// checkLiveness judges a job's end against its permanent fault: once it fired, the job ended within
// the bound, by the watchdog, with a line that names every rank still running and what it waited
// on.
func (j *job) checkLiveness(outcome Outcome) {
	if !j.cfg.Fault.permanent() || j.firedAt == 0 || j.violation != nil {
		return
	}
	if outcome != WatchdogEnd {
		if j.stalled {
			j.violate(
				nil,
				fmt.Sprintf(
					"the permanent %s took hold at tick %d, and the job ended %s (exit status %d), not by the watchdog (exit status 3)",
					j.cfg.Fault,
					j.firedAt,
					outcome,
					outcome.ExitStatus(),
				),
			)
		}
		return
	}
	if bound := j.cfg.liveBoundTicks(); j.endAt-j.firedAt > bound {
		j.violate(
			nil,
			fmt.Sprintf(
				"the permanent %s fired at tick %d and the watchdog ended the job at tick %d, past its bound of %d ticks: %s",
				j.cfg.Fault,
				j.firedAt,
				j.endAt,
				bound,
				j.stuck,
			),
		)
		return
	}
	for _, g := range j.groups {
		for _, r := range g.ranks {
			unnamed := r.state == stWait && (r.waitReason.Name == "" || r.waitReason.Hint == "")
			if r.state != stFinished &&
				(!r.blocked() || unnamed || r.state == stStopped && !r.stopsAt(r.stoppedAt)) {
				j.violate(
					r,
					fmt.Sprintf(
						"the watchdog's line cannot say what this rank waited on (%s): %s",
						r.waitingOn(),
						j.stuck,
					),
				)
				return
			}
		}
	}
}
