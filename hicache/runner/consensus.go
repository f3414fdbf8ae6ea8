package runner

import (
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/mpi"
)

// The runner's side of the step consensus: the core (package cache) builds every vector and reads
// every agreed one; here each collective is carried over the CP group's communicator, under the
// watchdog, and counted.

// consensusKinds are the kinds the report and the metrics count: the digest gather after a
// divergence is not one (it ends the run).
const consensusKinds = cache.DigestGather

// groupComm is what the consensus needs of the CP group's communicator: its size and this rank's
// place in it, MIN all-reduces (the vector when no other transport is given, and the object hashes)
// and the digest gather. *mpi.Comm has it.
type groupComm interface {
	Size() int
	Rank() int
	AllreduceUint64(send, recv []uint64, op mpi.Op) error
	AllgatherUint64(send, recv []uint64) error
}

// commMinAllReducer sends the MIN through the group's communicator: MPI on the CP communicator.
type commMinAllReducer struct{ comm groupComm }

func (m commMinAllReducer) Name() string { return "mpi" }
func (m commMinAllReducer) AllreduceMinUint64(v []uint64) error {
	return m.comm.AllreduceUint64(v, v, mpi.Min)
}

// consensus carries every consensus collective of one CP group. It holds only the CP communicator:
// there is no way to reach the world communicator from here, which is how the scoping rule is kept
// by construction.
type consensus struct {
	cp        groupComm
	group     int
	transport transport.MinAllReducer
	// oneRankTransport (tests only, Testing.ProveReducer) sends the transport's calls through it on
	// a one-rank group too, which skips them otherwise; they are still booked as skipped.
	oneRankTransport bool
	watchdog         *spmd.Watchdog
	stats            [consensusKinds]report.CollectiveStats
	enteredAt        time.Time // when the call in progress was entered
	// latency of the step consensus, for the report's p50 and p99
	stepUs report.Quantiles
	// every call's latency by kind, for the metrics
	latency [consensusKinds]report.LatencyHist
}

func newConsensus(
	cp groupComm,
	group int,
	transport transport.MinAllReducer,
	watchdog *spmd.Watchdog,
) *consensus {
	if transport == nil {
		transport = commMinAllReducer{cp}
	}
	return &consensus{cp: cp, group: group, transport: transport, watchdog: watchdog}
}

// enter books one call of kind k and returns false when the group has one rank and the call is
// skipped (a size-1 all-reduce would silently do nothing, so it is counted as skipped rather than
// as run). A second reduction of the same call (part 1) is timed with it, not counted again.
func (c *consensus) enter(k cache.ConsensusKind, part int, step int64) (ran bool) {
	size := c.cp.Size()
	counted := k < consensusKinds && part == 0
	if size == 1 {
		if counted {
			c.stats[k].Skipped++
		}
		return false
	}
	if counted {
		s := &c.stats[k]
		s.Count++
		if s.CommSizeMin == 0 || size < s.CommSizeMin {
			s.CommSizeMin = size
		}
		s.CommSizeMax = max(s.CommSizeMax, size)
	}
	c.watchdog.Arm(k.String()+" consensus", c.group, size, step)
	c.enteredAt = time.Now()
	return true
}

// leave disarms the watchdog and books the time spent in the call of kind k: a call's first
// reduction is one observation of its histogram, a second one (part 1) adds its time to that
// call's.
func (c *consensus) leave(k cache.ConsensusKind, part int) {
	c.watchdog.Disarm()
	if k >= consensusKinds {
		return
	}
	elapsed := time.Since(c.enteredAt)
	c.stats[k].Seconds += elapsed.Seconds()
	if part > 0 {
		c.latency[k].Extend(elapsed)
		return
	}
	c.latency[k].Observe(elapsed)
	if k == cache.StepConsensus {
		c.stepUs.Observe(elapsed)
	}
}

// collective carries one of the core's collectives: the step, flush and final vectors over the
// transport (NCCL in the GPU build), the rest over MPI on the CP communicator.
func (c *consensus) collective(x *cache.Collective) error {
	if !c.enter(x.Kind, x.Part, x.Step) {
		if c.oneRankTransport && x.Transport {
			return c.transport.AllreduceMinUint64(x.Words)
		}
		return nil
	}
	defer c.leave(x.Kind, x.Part)
	var err error
	switch {
	case x.Op == cache.OpGather:
		err = c.cp.AllgatherUint64([]uint64{x.Words[c.cp.Rank()]}, x.Words)
	case x.Transport:
		err = c.transport.AllreduceMinUint64(x.Words)
	default:
		err = c.cp.AllreduceUint64(x.Words, x.Words, mpi.Min)
	}
	return err // the core's message names the call, the group and the step
}

// minVector all-reduces MIN element-wise in place over the CP group, outside the step (validate's
// tallies).
func (c *consensus) minVector(values []uint64) error {
	if c.cp.Size() == 1 {
		return nil
	}
	return c.cp.AllreduceUint64(values, values, mpi.Min)
}
