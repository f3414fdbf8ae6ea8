package mpi

import (
	"runtime"
	"time"
)

// Why the MPI goroutine passes through Go's scheduler now and then.
//
// Go's system monitor (sysmon, runtime/proc.go retake) treats a goroutine that has not been through
// the scheduler for 10 ms as one to preempt. A goroutine inside a cgo call cannot be preempted, so
// sysmon takes its P instead, and it does so on every one of its ticks (20 us to 10 ms apart) for
// as long as that goroutine keeps making short cgo calls without ever being rescheduled: the P is
// taken back on the way out of each call, which does not count as being rescheduled. Every take
// wakes another runtime thread, and mpirun binds all of a rank's threads to one core, so the rank's
// polling MPI thread is switched out for it: a call now and then stalls for tens of microseconds.
//
// That is exactly the MPI goroutine's life in a run of back-to-back collectives (a one-element
// all-reduce costs about a microsecond). Measured at np 2 on this project's 2-core machines,
// per-call cycle counts of MPI_Allreduce from Go had a p99 2 to 12 times the C loop's (7 to 9 in
// most runs), the slowest 1% of calls held 12 to 22% of the time (4 to 5% in C), and the mean was
// 1.2 to 1.7 times C's. With one pass through the scheduler every few milliseconds the tail matched
// C's. A pass costs two thread hand-offs (the goroutine is locked to its thread), 4 to 16 us here,
// so it is taken at most once per schedulerPassInterval of MPI calls.
const (
	// schedulerPassInterval must stay well under sysmon's 10 ms (forcePreemptNS), with room for the
	// schedulerPassCheckEvery calls between two looks at the clock.
	schedulerPassInterval = 4 * time.Millisecond
	// schedulerPassCheckEvery spaces out the clock reads: a read costs about as much as the rest of
	// the binding's own work in a call.
	schedulerPassCheckEvery = 16
)

// schedulerPass is the state of the pass. Plain fields: MPI is FUNNELED, so only the goroutine that
// called Init makes MPI calls, and only it touches this.
type schedulerPass struct {
	calls  uint32        // MPI calls since the last look at the clock
	epoch  time.Time     // a fixed monotonic origin, so that a look is one time.Since
	last   time.Duration // when the last pass was, since epoch
	passes uint64        // passes taken, for tests
}

var pass = schedulerPass{epoch: time.Now()}

// afterCall counts one blocking MPI call and, when the goroutine has been making MPI calls for
// schedulerPassInterval without a pass, yields so that the scheduler sees it again. Gosched keeps
// the goroutine locked to its thread, which FUNNELED requires.
func (p *schedulerPass) afterCall() {
	p.calls++
	if p.calls < schedulerPassCheckEvery {
		return
	}
	p.calls = 0
	now := time.Since(p.epoch)
	if now-p.last < schedulerPassInterval {
		return
	}
	p.last = now
	p.passes++
	runtime.Gosched()
}

// AfterForeignCall counts one blocking MPI call that the MPI goroutine made through a cgo binding
// of its own (the benchmark's C references do), so that the scheduler pass covers those calls as it
// covers this package's.
func AfterForeignCall() { pass.afterCall() }
