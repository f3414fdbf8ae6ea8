package mpi

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestFreedCommunicatorsDoNotHauntTheirSuccessors frees communicators and makes new ones of other
// shapes, so that MPI hands the freed integer handles out again; each new communicator must act as
// itself (its size, its members' sum), never as the freed one a stale entry of the C side's handle
// cache would name. Two are freed in creation order before the next is made: the next then gets the
// first one's integer but, from malloc, the second one's memory, so a stale entry points at the
// wrong (or a dead) communicator.
func TestFreedCommunicatorsDoNotHauntTheirSuccessors(t *testing.T) {
	// 66 communicators: more than the cache has entries (64). Each split of 8 ranks on
	for round := range 22 {
		// 2 cores costs MPICH about 100 ms (mpi.mk), so no more than that
		var comms [3]*Comm
		for i := range comms {
			comms[i] = splitAndCheck(t, 1+(round+i)%3)
			if i == 1 {
				for _, c := range comms[:2] {
					if err := c.Free(); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
		if err := comms[2].Free(); err != nil {
			t.Fatal(err)
		}
	}
}

// splitAndCheck splits the world into groups of width consecutive ranks and checks that the new
// communicator has its group's size and reduces over its group only.
func splitAndCheck(t *testing.T, width int) *Comm {
	t.Helper()
	n, r := world.Size(), world.Rank()
	c, err := world.Split(r/width, r, "haunt")
	if err != nil {
		t.Fatal(err)
	}
	wantSize := min(width, n-(r/width)*width)
	got := []int64{1}
	if err := c.AllreduceInt64(got, got, Sum); err != nil {
		t.Fatal(err)
	}
	if c.Size() != wantSize || got[0] != int64(wantSize) {
		t.Fatalf("groups of %d: size %d and SUM %d, want %d", width, c.Size(), got[0], wantSize)
	}
	return c
}

// TestSchedulerPassKeepsTheThread runs barriers back to back for several pass intervals: the
// goroutine must have passed through the scheduler (see schedpass.go) and still be on its thread,
// as MPI_THREAD_FUNNELED requires of the goroutine that called Init. (go test runs each test on a
// goroutine of its own, so this one locks itself the way Init locks the main goroutine.)
func TestSchedulerPassKeepsTheThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	tid := syscall.Gettid()
	before := pass.passes
	start := time.Now()
	for {
		for range schedulerPassCheckEvery {
			if err := world.Barrier(); err != nil {
				t.Fatal(err)
			}
		}
		// Every rank stops on the same agreed round, so all enter the same number of barriers: once
		// it has passed and run several intervals, or after a bound a loaded node cannot reach (a
		// rank descheduled for 20 ms mid-round once ended the loop after a single round, before any
		// look at the clock could pass).
		done := []int64{0}
		if took := time.Since(start); took > 5*schedulerPassInterval && pass.passes != before ||
			took > 10*time.Second {
			done[0] = 1
		}
		if err := world.AllreduceInt64(done, done, Min); err != nil {
			t.Fatal(err)
		}
		if done[0] == 1 {
			break
		}
	}
	if pass.passes == before {
		t.Errorf("no pass through the scheduler in %v of back-to-back barriers", time.Since(start))
	}
	if now := syscall.Gettid(); now != tid {
		t.Errorf("the MPI goroutine moved from thread %d to %d", tid, now)
	}
}

// TestHotCollectivesDoNotAllocate pins that writing_check's all-reduce and the barrier allocate
// nothing per call: the binding's cost per call is meant to be one cgo crossing, and garbage would
// add collections.
func TestHotCollectivesDoNotAllocate(t *testing.T) {
	buf := make([]uint64, 1)
	var err error
	allocs := testing.AllocsPerRun(200, func() {
		if e := world.AllreduceUint64(buf, buf, Min); e != nil {
			err = e
		}
		if e := world.Barrier(); e != nil {
			err = e
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("all-reduce + barrier allocate %.1f objects per call", allocs)
	}
}

// BenchmarkAllreduceUint64One is writing_check's call, one element in place. Run as a singleton
// (`go test -run XXX -bench . ./mpi/`) it is the binding's own cost; `cphicache bench allreduce`
// measures it under mpirun beside a C loop.
func BenchmarkAllreduceUint64One(b *testing.B) {
	buf := make([]uint64, 1)
	b.ReportAllocs()
	for b.Loop() {
		if err := world.AllreduceUint64(buf, buf, Min); err != nil {
			b.Fatal(err)
		}
	}
}
