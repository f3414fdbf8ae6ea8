package runner

import (
	"fmt"
	"strings"
)

// The runner's waits, each with what it waits on and its bound (DESIGN.md, "Asserts" and "Bounded
// waits"): none waits unbounded, so that a stuck copy engine, filesystem or peer ends the job
// naming what it waited for rather than hanging it. The step goroutine's:
//
//	wait                                waits on                              bound
//	a consensus, the step broadcast     the CP group's peers (MPI or NCCL)    the watchdog's collective slot
//	Wait (load-backs, backups, L3 I/O)  this rank's copy worker and L3 I/O    the watchdog's drain slot, named
//	                                                                          by the core's WaitReason
//	enqueue (a full copy or L3 queue)   the worker taking the next job        the drain slot, named by the queue
//	deliver(true), between polls        a completion, or the poll interval    drainPollInterval (50 us), inside
//	                                                                          one of the two above
//	an L3 read in flight                the filesystem                        its deadline (readDeadline), then
//	                                                                          given up as failed
//	the end: the copy worker, L3        the copies and writes queued          the drain slot ("copies at the
//	writes                                                                    end", "L3 writes at the end")
//	the end: L3 reads                   the filesystem                        l3CloseReadGrace (2 s), then left
//	                                                                          behind
//	the ideal hits (CP rank 0)          a goroutine over the replayed events  a pure computation over a finite
//	                                                                          list
//
// Besides: the serving clock's pacing sleeps until a step's modelled end (servingclock.go, bounded
// by the model), and --inject-hang blocks for good on purpose: its peers' watchdogs end the job.

// localWait polls until done under the watchdog's drain slot, named name (hint says what may be
// stuck), handing the core what finishes meanwhile. One local wait at a time: the drain slot times
// one wait, and a wait begun inside another would disarm the outer one's slot when it ended.
func (rs *runState) localWait(name, hint string, done func() bool) {
	if rs.waiting != "" {
		panic(rs.broken("the local wait %q began inside the local wait %q", name, rs.waiting))
	}
	rs.waiting = name
	rs.cons.watchdog.ArmDrain(name, hint, rs.cons.group, rs.cons.cp.Size(), rs.stepsDone())
	for !done() {
		rs.deliver(true)
	}
	rs.cons.watchdog.DisarmDrain()
	rs.waiting = ""
}

// endWait is a wait of the run's end under the drain slot, when there is a watchdog (a set-up that
// failed before the consensus was made has none, and nothing queued to wait for).
func (rs *runState) endWait(name, hint string, wait func()) {
	if rs.cons == nil {
		wait()
		return
	}
	rs.cons.watchdog.ArmDrain(name, hint, rs.cons.group, rs.cons.cp.Size(), rs.stepsDone())
	defer rs.cons.watchdog.DisarmDrain()
	wait()
}

// broken is what the runner panics with on a broken invariant of its own bookkeeping: the
// invariant, named by the message, and a dump of the state it checked (the waits, the queues, the
// L3 reads in flight).
func (rs *runState) broken(format string, args ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "hicache: broken invariant: "+format+"\n", args...)
	t := rs.job.Topo
	fmt.Fprintf(&b, "world rank %d, CP group %d rank %d, step %d; local wait in progress %q\n",
		t.WorldRank, t.CPGroup, t.CPRank, rs.stepsDone(), rs.waiting)
	fmt.Fprintf(
		&b,
		"copy tasks queued %d of %d; completions taken and not delivered %d\n",
		len(rs.tasks),
		cap(rs.tasks),
		len(rs.doneBuf),
	)
	if rs.l3 != nil {
		fmt.Fprintf(
			&b,
			"L3: %d reads in flight, write jobs queued %d, read jobs queued %d\n",
			len(rs.l3.reads),
			len(rs.l3.writeJobs),
			len(rs.l3.readJobs),
		)
	}
	return b.String()
}
