package hicache

import (
	"fmt"
	"time"

	"github.com/cphicache/cphicache/mpi"
)

// CollectiveKind names a consensus collective of the design's table (section 3).
type CollectiveKind int

const (
	WritingCheck CollectiveKind = iota
	LoadingCheck
	PlacementAssert
	FlushBarrier
	collectiveKinds
)

var collectiveNames = [collectiveKinds]string{"writing_check", "loading_check", "placement_assert", "flush_barrier"}

func (k CollectiveKind) String() string { return collectiveNames[k] }

// CollectiveStats counts one kind of collective and the sizes of the communicators it ran on, so that a run can
// prove the scoping rule: every consensus collective ran on a communicator of exactly cp ranks.
type CollectiveStats struct {
	Count       int64 // collectives entered
	Skipped     int64 // skipped because the CP group has a single rank
	CommSizeMin int   // smallest communicator used (0 when none ran)
	CommSizeMax int
	Seconds     float64 // wall time this rank spent inside them
}

// MinAllReducer is the transport of writing_check's MIN all-reduce: MPI in the CPU build, NCCL in the GPU build.
type MinAllReducer interface {
	Name() string
	AllreduceMinUint64(values []uint64) error // in place
}

// mpiMinAllReducer sends the MIN through MPI on the CP communicator.
type mpiMinAllReducer struct{ comm *mpi.Comm }

func (m mpiMinAllReducer) Name() string { return "mpi" }
func (m mpiMinAllReducer) AllreduceMinUint64(v []uint64) error {
	return m.comm.AllreduceUint64(v, v, mpi.Min)
}

// consensus runs every consensus collective of one CP group. It holds only the CP communicator: there is no way
// to reach the world communicator from here, which is how the scoping rule is kept by construction.
type consensus struct {
	cp       *mpi.Comm
	group    int
	frontier MinAllReducer
	watchdog *Watchdog
	stats    [collectiveKinds]CollectiveStats
	step     int64 // the event stream's step, for watchdog messages

	enteredAt      time.Time // when the collective in progress was entered
	writingCheckUs []float64 // latency samples of writing_check, preallocated
	scratch        []uint64
}

func newConsensus(cp *mpi.Comm, group int, frontier MinAllReducer, watchdog *Watchdog, stepsHint int) *consensus {
	if frontier == nil {
		frontier = mpiMinAllReducer{cp}
	}
	return &consensus{
		cp: cp, group: group, frontier: frontier, watchdog: watchdog,
		writingCheckUs: make([]float64, 0, stepsHint+16), scratch: make([]uint64, 2),
	}
}

// enter books one collective of kind k; it reports false when the group has one rank and the collective is
// skipped (a size-1 all-reduce would silently do nothing, so it is counted as skipped rather than as run).
func (c *consensus) enter(k CollectiveKind) bool {
	s := &c.stats[k]
	if c.cp.Size() == 1 {
		s.Skipped++
		return false
	}
	s.Count++
	size := c.cp.Size()
	if s.CommSizeMin == 0 || size < s.CommSizeMin {
		s.CommSizeMin = size
	}
	if size > s.CommSizeMax {
		s.CommSizeMax = size
	}
	c.watchdog.Arm(k.String(), c.group, size, c.step)
	c.enteredAt = time.Now()
	return true
}

// leave disarms the watchdog and books the time spent in the collective of kind k.
func (c *consensus) leave(k CollectiveKind) {
	c.watchdog.Disarm()
	c.stats[k].Seconds += time.Since(c.enteredAt).Seconds()
}

// frontierCheck is writing_check's or loading_check's all-reduce: MIN of the local frontier, and MIN of a flag
// that says this rank has nothing of that direction in flight. The agreed flag is what ends a drain loop, so every
// rank leaves the loop at the same iteration even if their queues differed (as they would after a divergence,
// until the next assert catches it): the collectives stay matched whatever the local state.
func (c *consensus) frontierCheck(k CollectiveKind, local uint64, idle bool) (uint64, bool, error) {
	if !c.enter(k) {
		return local, idle, nil
	}
	defer c.leave(k)
	c.scratch[0], c.scratch[1] = local, 0
	if idle {
		c.scratch[1] = 1
	}
	var err error
	if k == WritingCheck {
		err = c.frontier.AllreduceMinUint64(c.scratch[:2])
	} else {
		err = c.cp.AllreduceUint64(c.scratch[:2], c.scratch[:2], mpi.Min)
	}
	if err != nil {
		return 0, false, fmt.Errorf("%s on CP group %d (%d ranks) at step %d: %w", k, c.group, c.cp.Size(), c.step, err)
	}
	if k == WritingCheck && len(c.writingCheckUs) < cap(c.writingCheckUs) {
		c.writingCheckUs = append(c.writingCheckUs, float64(time.Since(c.enteredAt).Nanoseconds())/1e3)
	}
	return c.scratch[0], c.scratch[1] == 1, nil
}

// digestsAgree all-reduces MIN and MAX of the placement digest (as MIN of digest and of its complement) and
// reports whether every rank holds the same digest.
func (c *consensus) digestsAgree(digest uint64) (bool, error) {
	if !c.enter(PlacementAssert) {
		return true, nil
	}
	defer c.leave(PlacementAssert)
	c.scratch[0], c.scratch[1] = digest, ^digest
	if err := c.cp.AllreduceUint64(c.scratch, c.scratch, mpi.Min); err != nil {
		return false, fmt.Errorf("placement assert on CP group %d at step %d: %w", c.group, c.step, err)
	}
	minDigest, maxDigest := c.scratch[0], ^c.scratch[1]
	return minDigest == maxDigest, nil
}

// gatherDigests collects every CP rank's digest, for the divergence report.
func (c *consensus) gatherDigests(digest uint64) ([]uint64, error) {
	all := make([]uint64, c.cp.Size())
	if err := c.cp.AllgatherUint64([]uint64{digest}, all); err != nil {
		return nil, err
	}
	return all, nil
}

// barrier is the flush barrier.
func (c *consensus) barrier() error {
	if !c.enter(FlushBarrier) {
		return nil
	}
	defer c.leave(FlushBarrier)
	if err := c.cp.Barrier(); err != nil {
		return fmt.Errorf("flush barrier on CP group %d at step %d: %w", c.group, c.step, err)
	}
	return nil
}

// minVector all-reduces MIN element-wise in place (used with complemented elements to get MAX in the same call).
func (c *consensus) minVector(k CollectiveKind, values []uint64) error {
	if !c.enter(k) {
		return nil
	}
	defer c.leave(k)
	if err := c.cp.AllreduceUint64(values, values, mpi.Min); err != nil {
		return fmt.Errorf("%s on CP group %d at step %d: %w", k, c.group, c.step, err)
	}
	return nil
}
