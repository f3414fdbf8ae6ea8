package hicache

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/mpi"
)

// The step consensus (design section 3): everything the ranks of a CP group must agree on in a step travels in one
// all-reduce MIN of a fixed vector of 64-bit words. MAX of a word is the complement of MIN of its complement, so a
// word and its complement give both, in the same call.

// ConsensusKind names a consensus call: where in the step it is entered.
type ConsensusKind int

const (
	StepConsensus  ConsensusKind = iota // once at the end of every step: commit, load-backs, digest, errors
	FlushConsensus                      // inside a flush, after the drain: the barrier and the assert before the reset
	FinalConsensus                      // after the last step: the final drain and assert
	ObjectCompare                       // every --placement-assert-every steps and at a flush: each object's placement
	PrefetchCount                       // with an L3, at the start of every serving step: the L3 blocks each request can prefetch
	consensusKinds
)

var consensusNames = [consensusKinds]string{"step", "flush", "final", "object_compare", "l3_prefetch"}

func (k ConsensusKind) String() string {
	if k < 0 || k >= consensusKinds {
		return fmt.Sprintf("consensus kind %d", int(k))
	}
	return consensusNames[k]
}

// The words of the consensus vector.
const (
	wordTag              = iota // kind << 56 | per-communicator call counter
	wordTagNot                  // ^tag: MIN(^tag) = ^MAX(tag)
	wordError                   // lowest failing CP rank << 32 | its failure code; noFailure when none
	wordWriteFrontier           // writing_check: every backup with seq <= it is done on the rank
	wordWriteIdle               // 1 when the rank has no backup in flight
	wordLoadFrontier            // loading_check: every load-back with seq <= it is done and verified on the rank
	wordLoadDone                // 1 when the rank has no load-back in flight
	wordDigest                  // the placement digest
	wordDigestNot               // ^digest
	wordStoreFrontier           // every L3 block write with seq <= it is done on the rank (or is not the rank's)
	wordPrefetchFrontier        // every L3 prefetch with seq <= it has finished its reads on the rank
	wordPrefetchFailed          // the rank's lowest failed prefetch read, seq << prefetchBlockBits | block; noFailure when none
	consensusWords
)

// noFailure is the error word of a rank that has nothing to report: larger than every encoded failure, so the
// MIN is the lowest failing rank's.
const noFailure = math.MaxUint64

// tagCounterBits leaves the top byte of a tag for its kind.
const tagCounterBits = 56

// CollectiveStats counts one kind of consensus call and the sizes of the communicators it ran on, so that a run can
// prove the scoping rule: every consensus collective ran on a communicator of exactly cp ranks.
type CollectiveStats struct {
	Count       int64 // calls entered
	Skipped     int64 // skipped because the CP group has a single rank
	CommSizeMin int   // smallest communicator used (0 when none ran)
	CommSizeMax int
	Seconds     float64 // wall time this rank spent inside them
}

// groupComm is what the consensus needs of the CP group's communicator: its size and this rank's place in it,
// MIN all-reduces (the vector when no other transport is given, and the object hashes) and the digest gather.
// *mpi.Comm has it; the in-process tests run a group of ranks in one process over an in-memory one.
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

// vote is what one rank brings to a consensus call.
type vote struct {
	writeFrontier uint64
	writeIdle     bool
	loadFrontier  uint64
	loadDone      bool
	digest        uint64
	failure       error // this rank's own failure since the last call, or nil

	storeFrontier, prefetchFrontier, prefetchFailed uint64 // the L3's (l3tier.go); 0, 0, noFailure without one
}

// agreement is what the group agreed in one call.
type agreement struct {
	writeFrontier uint64 // MIN: every rank finished every backup up to here
	writeIdle     bool   // every rank has no backup in flight
	loadFrontier  uint64
	loadDone      bool
	digestMin     uint64
	digestMax     uint64

	storeFrontier, prefetchFrontier, prefetchFailed uint64
}

func (a agreement) digestsAgree() bool { return a.digestMin == a.digestMax }

// consensus runs every consensus collective of one CP group. It holds only the CP communicator: there is no way
// to reach the world communicator from here, which is how the scoping rule is kept by construction.
type consensus struct {
	cp        groupComm
	group     int
	transport transport.MinAllReducer
	watchdog  *spmd.Watchdog
	stats     [consensusKinds]CollectiveStats
	calls     uint64 // consensus calls entered on this communicator: the counter of the tag
	step      int64  // the event stream's step, for messages

	enteredAt time.Time                   // when the call in progress was entered
	stepUs    []float64                   // latency samples of the step consensus, preallocated
	latency   [consensusKinds]latencyHist // every call's latency by kind, for the metrics
	vector    [consensusWords]uint64
	countBuf  []uint64 // minCounts' vector
}

func newConsensus(cp groupComm, group int, transport transport.MinAllReducer, watchdog *spmd.Watchdog, stepsHint int) *consensus {
	if transport == nil {
		transport = commMinAllReducer{cp}
	}
	return &consensus{cp: cp, group: group, transport: transport, watchdog: watchdog, stepUs: make([]float64, 0, stepsHint+16)}
}

// enter books one call of kind k and returns its tag; ran is false when the group has one rank and the call is
// skipped (a size-1 all-reduce would silently do nothing, so it is counted as skipped rather than as run).
func (c *consensus) enter(k ConsensusKind) (tag uint64, ran bool) {
	c.calls++
	tag = uint64(k)<<tagCounterBits | c.calls&(1<<tagCounterBits-1)
	s := &c.stats[k]
	size := c.cp.Size()
	if size == 1 {
		s.Skipped++
		return tag, false
	}
	s.Count++
	if s.CommSizeMin == 0 || size < s.CommSizeMin {
		s.CommSizeMin = size
	}
	s.CommSizeMax = max(s.CommSizeMax, size)
	c.watchdog.Arm(k.String()+" consensus", c.group, size, c.step)
	c.enteredAt = time.Now()
	return tag, true
}

// leave disarms the watchdog and books the time spent in the call of kind k.
func (c *consensus) leave(k ConsensusKind) {
	c.watchdog.Disarm()
	elapsed := time.Since(c.enteredAt)
	c.stats[k].Seconds += elapsed.Seconds()
	c.latency[k].observe(elapsed)
	if k == StepConsensus && len(c.stepUs) < cap(c.stepUs) {
		c.stepUs = append(c.stepUs, float64(elapsed.Nanoseconds())/1e3)
	}
}

// agree runs one consensus call of kind k (step, flush or final). It returns the group's agreement, or the error
// that ends the group's run, the same on every rank: a rank's own failure (to that rank, as it is) or a
// *PeerFailure naming the failing rank (to the others), then ranks out of step. A digest that differs is not an
// error here: the caller decides what a divergence means (fail, or record it in validate).
func (c *consensus) agree(k ConsensusKind, v vote) (agreement, error) {
	tag, ran := c.enter(k)
	w := &c.vector
	*w = [consensusWords]uint64{wordTag: tag, wordTagNot: ^tag, wordError: noFailure,
		wordWriteFrontier: v.writeFrontier, wordWriteIdle: boolWord(v.writeIdle), wordLoadFrontier: v.loadFrontier,
		wordLoadDone: boolWord(v.loadDone), wordDigest: v.digest, wordDigestNot: ^v.digest,
		wordStoreFrontier: v.storeFrontier, wordPrefetchFrontier: v.prefetchFrontier, wordPrefetchFailed: v.prefetchFailed}
	if v.failure != nil {
		w[wordError] = uint64(c.cp.Rank())<<32 | uint64(failureCodeOf(v.failure))
	}
	if ran {
		err := c.transport.AllreduceMinUint64(w[:])
		c.leave(k)
		if err != nil {
			return agreement{}, errors.Join(v.failure, fmt.Errorf("%s consensus on CP group %d (%d ranks) at step %d: %w", k, c.group, c.cp.Size(), c.step, err))
		}
	}
	if err := c.checkAgreed(w, v.failure); err != nil {
		return agreement{}, err
	}
	return agreement{writeFrontier: w[wordWriteFrontier], writeIdle: w[wordWriteIdle] == 1,
		loadFrontier: w[wordLoadFrontier], loadDone: w[wordLoadDone] == 1,
		digestMin: w[wordDigest], digestMax: ^w[wordDigestNot],
		storeFrontier: w[wordStoreFrontier], prefetchFrontier: w[wordPrefetchFrontier], prefetchFailed: w[wordPrefetchFailed]}, nil
}

// checkAgreed turns the reduced error and tag words into the error every rank of the group returns.
func (c *consensus) checkAgreed(w *[consensusWords]uint64, own error) error {
	if failed := w[wordError]; failed != noFailure {
		rank, code := int(failed>>32), FailureCode(uint32(failed))
		if own != nil && rank == c.cp.Rank() {
			return own
		}
		return &PeerFailure{Group: c.group, CPRank: rank, Code: code, Step: c.step}
	}
	if minTag, maxTag := w[wordTag], ^w[wordTagNot]; minTag != maxTag {
		return &OutOfStepError{Group: c.group, Step: c.step, MinTag: minTag, MaxTag: maxTag}
	}
	return nil
}

func boolWord(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// compareObjects reduces, over the CP group, MIN of every element of hashes in place (callers pass each value
// beside its complement to get MAX in the same call). It is a call of its own kind, on MPI (the placement assert
// travels over MPI), in two reductions: first its tag and the vector's length with their complements, since
// vectors of different lengths cannot be reduced element by element; then, when every rank has as many, the
// vector. sameCount is false when the lengths differ.
func (c *consensus) compareObjects(hashes []uint64) (sameCount bool, err error) {
	tag, ran := c.enter(ObjectCompare)
	if !ran {
		return true, nil
	}
	defer c.leave(ObjectCompare)
	n := uint64(len(hashes))
	head := []uint64{tag, ^tag, n, ^n}
	if err := c.cp.AllreduceUint64(head, head, mpi.Min); err != nil {
		return false, fmt.Errorf("object_compare on CP group %d at step %d: %w", c.group, c.step, err)
	}
	if head[0] != ^head[1] {
		return false, &OutOfStepError{Group: c.group, Step: c.step, MinTag: head[0], MaxTag: ^head[1]}
	}
	if head[2] != ^head[3] || n == 0 {
		return head[2] == ^head[3], nil
	}
	if err := c.cp.AllreduceUint64(hashes, hashes, mpi.Min); err != nil {
		return false, fmt.Errorf("object_compare on CP group %d at step %d: %w", c.group, c.step, err)
	}
	return true, nil
}

// minCounts reduces MIN of counts over the CP group in place: the L3 blocks every rank found for each request of
// a step. It is a call of its own kind, on MPI, entered at the start of every serving step of a run with an L3,
// whether or not this rank has a candidate; the vector's length is fixed by --batch-requests, the same on every
// rank, and it travels behind its tag and the tag's complement.
func (c *consensus) minCounts(counts []uint64) error {
	tag, ran := c.enter(PrefetchCount)
	if !ran {
		return nil
	}
	defer c.leave(PrefetchCount)
	c.countBuf = append(append(c.countBuf[:0], tag, ^tag), counts...)
	if err := c.cp.AllreduceUint64(c.countBuf, c.countBuf, mpi.Min); err != nil {
		return fmt.Errorf("l3_prefetch on CP group %d at step %d: %w", c.group, c.step, err)
	}
	if c.countBuf[0] != ^c.countBuf[1] {
		return &OutOfStepError{Group: c.group, Step: c.step, MinTag: c.countBuf[0], MaxTag: ^c.countBuf[1]}
	}
	copy(counts, c.countBuf[2:])
	return nil
}

// gatherDigests collects every CP rank's digest, for the divergence report. Every rank of the group calls it
// after the same agreement showed the digests differ.
func (c *consensus) gatherDigests(digest uint64) ([]uint64, error) {
	all := make([]uint64, c.cp.Size())
	if err := c.cp.AllgatherUint64([]uint64{digest}, all); err != nil {
		return nil, err
	}
	return all, nil
}

// minVector all-reduces MIN element-wise in place over the CP group, outside the step (validate's tallies).
func (c *consensus) minVector(values []uint64) error {
	if c.cp.Size() == 1 {
		return nil
	}
	return c.cp.AllreduceUint64(values, values, mpi.Min)
}

// OutOfStepError: the ranks of a CP group entered different consensus calls (a different kind, or a different
// number of calls so far). Their vectors were paired by MPI all the same; the tag words show it.
type OutOfStepError struct {
	Group          int
	Step           int64
	MinTag, MaxTag uint64
}

// Scope: every rank of the group sees the same agreed tags.
func (e *OutOfStepError) Scope() spmd.Scope { return spmd.GroupScope }

func (e *OutOfStepError) Error() string {
	describe := func(tag uint64) string {
		return fmt.Sprintf("%s call #%d", ConsensusKind(tag>>tagCounterBits), tag&(1<<tagCounterBits-1))
	}
	return fmt.Sprintf("collectives out of step in CP group %d at step %d: one rank entered the %s while another entered the %s",
		e.Group, e.Step, describe(e.MinTag), describe(e.MaxTag))
}
