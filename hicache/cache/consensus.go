package cache

import (
	"errors"
	"fmt"
	"math"

	"github.com/cphicache/cphicache/internal/errscope"
)

// The step consensus (DESIGN.md, "The step consensus"): everything the ranks of a CP group must
// agree on in a step travels in one all-reduce MIN of a fixed vector of 64-bit words. MAX of a word
// is the complement of MIN of its complement, so a word and its complement give both, in the same
// call. This file builds the vectors and reads the agreed ones; the Env carries them.

// ConsensusKind names a consensus call: where in the step it is entered.
type ConsensusKind int

const (
	// once at the end of every step: commit, load-backs, digest, errors
	StepConsensus ConsensusKind = iota
	// inside a flush, after the drain: the barrier and the assert before the reset
	FlushConsensus
	FinalConsensus // after the last step: the final drain and assert
	// every --placement-assert-every steps and at a flush: each object's placement
	ObjectCompare
	// with an L3, at the start of every serving step: the L3 blocks each request can prefetch
	PrefetchCount
	DigestGather // after a divergence: every rank's digest, for the message
	ConsensusKinds
)

var consensusNames = [ConsensusKinds]string{
	"step",
	"flush",
	"final",
	"object_compare",
	"l3_prefetch",
	"digest_gather",
}

func (k ConsensusKind) String() string {
	if k < 0 || k >= ConsensusKinds {
		return fmt.Sprintf("consensus kind %d", int(k))
	}
	return consensusNames[k]
}

// The words of the consensus vector.
const (
	wordTag    = iota // kind << 56 | per-communicator call counter
	wordTagNot        // ^tag: MIN(^tag) = ^MAX(tag)
	// lowest failing CP rank << 32 | its failure code; noFailure when none
	wordError
	wordWriteFrontier // writing_check: every backup with seq <= it is done on the rank
	wordWriteIdle     // 1 when the rank has no backup in flight
	// loading_check: every load-back with seq <= it is done and verified on the rank
	wordLoadFrontier
	wordLoadDone  // 1 when the rank has no load-back in flight
	wordDigest    // the placement digest
	wordDigestNot // ^digest
	// every L3 block write with seq <= it is done on the rank (or is not the rank's)
	wordStoreFrontier
	// every L3 prefetch with seq <= it has finished its reads on the rank
	wordPrefetchFrontier
	// the rank's lowest failed prefetch read, seq << prefetchBlockBits | block; noFailure when none
	wordPrefetchFailed
	consensusWords
)

// VectorWords is the length of the step consensus vector without an L3: what one step all-reduces.
const VectorWords = consensusWords

// StepVectorWords is the length of the consensus vector of a core configured with l3: the fixed
// words, then, with an L3, one word a request of the next step's batch: the L3 blocks each rank
// found for it ahead of need (l3exists.go), so that the next step agrees its prefetches without an
// l3_prefetch call of its own.
func StepVectorWords(l3 L3Config) int {
	if !l3.Enabled {
		return consensusWords
	}
	return consensusWords + l3.BatchRequests
}

// noFailure is the error word of a rank that has nothing to report: larger than every encoded
// failure, so the MIN is the lowest failing rank's.
const noFailure = math.MaxUint64

// tagCounterBits leaves the top byte of a tag for its kind.
const tagCounterBits = 56

// vote is what one rank brings to a consensus call.
type vote struct {
	writeFrontier uint64
	writeIdle     bool
	loadFrontier  uint64
	loadDone      bool
	digest        uint64
	failure       error // this rank's own failure since the last call, or nil

	// the L3's (l3tier.go); 0, 0, noFailure without one
	storeFrontier, prefetchFrontier, prefetchFailed uint64
	// by request of the next step: the L3 blocks found (l3exists.go)
	prefetchAhead []uint64
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
	// MIN, by request of the next step; valid until the next call
	prefetchAhead []uint64
}

func (a agreement) digestsAgree() bool { return a.digestMin == a.digestMax }

// nextTag books one consensus call of kind k on this rank's CP communicator and returns its tag.
func (c *Core) nextTag(k ConsensusKind) uint64 {
	c.calls++
	return uint64(k)<<tagCounterBits | c.calls&(1<<tagCounterBits-1)
}

// collective hands one collective to the Env.
func (c *Core) collective(k ConsensusKind, op Op, part int, transport bool, words []uint64) error {
	return c.env.Collective(
		&Collective{Kind: k, Op: op, Part: part, Transport: transport, Step: c.step, Words: words},
	)
}

// consensus runs one consensus call of kind k (step, flush or final). It returns the group's
// agreement, or the error that ends the group's run, the same on every rank: a rank's own failure
// (to that rank, as it is) or a *PeerFailure naming the failing rank (to the others), then ranks
// out of step. A digest that differs is not an error here: the caller decides what a divergence
// means (fail, or record it in validate).
func (c *Core) consensus(k ConsensusKind, v vote) (agreement, error) {
	tag := c.nextTag(k)
	if n := StepVectorWords(c.cfg.L3); len(c.vector) != n {
		c.vector = make([]uint64, n)
	}
	w := c.vector
	copy(w, []uint64{wordTag: tag, wordTagNot: ^tag, wordError: noFailure,
		wordWriteFrontier: v.writeFrontier, wordWriteIdle: boolWord(v.writeIdle), wordLoadFrontier: v.loadFrontier,
		wordLoadDone: boolWord(v.loadDone), wordDigest: v.digest, wordDigestNot: ^v.digest,
		wordStoreFrontier: v.storeFrontier, wordPrefetchFrontier: v.prefetchFrontier,
		wordPrefetchFailed: v.prefetchFailed})
	clear(w[consensusWords:])
	copy(w[consensusWords:], v.prefetchAhead)
	if v.failure != nil {
		w[wordError] = uint64(c.cfg.CPRank)<<32 | uint64(failureCodeOf(v.failure))
	}
	if err := c.collective(k, OpMin, 0, true, w); err != nil {
		return agreement{}, errors.Join(
			v.failure,
			fmt.Errorf(
				"%s consensus on CP group %d (%d ranks) at step %d: %w",
				k,
				c.cfg.Group,
				c.cfg.Geometry.CPSize,
				c.step,
				err,
			),
		)
	}
	if err := c.checkAgreed(w, v.failure); err != nil {
		var outOfStep *OutOfStepError
		if errors.As(err, &outOfStep) && w[wordDigest] != ^w[wordDigestNot] {
			return agreement{}, c.divergenceOutOfStep(
				outOfStep,
				v.digest,
			) // the divergence is why they went out of step
		}
		return agreement{}, err
	}
	if w[wordWriteFrontier] > v.writeFrontier || w[wordLoadFrontier] > v.loadFrontier ||
		w[wordStoreFrontier] > v.storeFrontier ||
		w[wordPrefetchFrontier] > v.prefetchFrontier ||
		w[wordDigest] > v.digest ||
		^w[wordDigestNot] < v.digest {
		panic(
			c.broken(
				"the %s consensus agreed %v, more than this rank's own vote %+v: a MIN is never above a rank's own word",
				k,
				w[:consensusWords],
				v,
			),
		)
	}
	return agreement{writeFrontier: w[wordWriteFrontier], writeIdle: w[wordWriteIdle] == 1,
		loadFrontier: w[wordLoadFrontier], loadDone: w[wordLoadDone] == 1,
		digestMin: w[wordDigest], digestMax: ^w[wordDigestNot],
		storeFrontier: w[wordStoreFrontier], prefetchFrontier: w[wordPrefetchFrontier],
		prefetchFailed: w[wordPrefetchFailed],
		prefetchAhead:  w[consensusWords:]}, nil
}

// checkAgreed turns the reduced error and tag words into the error every rank of the group returns.
func (c *Core) checkAgreed(w []uint64, own error) error {
	if failed := w[wordError]; failed != noFailure {
		rank, code := int(failed>>32), FailureCode(uint32(failed))
		if own != nil && rank == c.cfg.CPRank {
			return own
		}
		return &PeerFailure{Group: c.cfg.Group, CPRank: rank, Code: code, Step: c.step}
	}
	if minTag, maxTag := w[wordTag], ^w[wordTagNot]; minTag != maxTag {
		return &OutOfStepError{Group: c.cfg.Group, Step: c.step, MinTag: minTag, MaxTag: maxTag}
	}
	return nil
}

func boolWord(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// compareObjects reduces, over the CP group, MIN of every element of hashes in place (callers pass
// each value beside its complement to get MAX in the same call). It is a call of its own kind, on
// MPI (the placement assert travels over MPI), in two reductions: first its tag and the vector's
// length with their complements, since vectors of different lengths cannot be reduced element by
// element; then, when every rank has as many, the vector. sameCount is false when the lengths
// differ.
func (c *Core) compareObjects(hashes []uint64) (sameCount bool, err error) {
	tag := c.nextTag(ObjectCompare)
	n := uint64(len(hashes))
	head := []uint64{tag, ^tag, n, ^n}
	if err := c.collective(ObjectCompare, OpMin, 0, false, head); err != nil {
		return false, fmt.Errorf(
			"object_compare on CP group %d at step %d: %w",
			c.cfg.Group,
			c.step,
			err,
		)
	}
	if head[0] != ^head[1] {
		return false, &OutOfStepError{
			Group:  c.cfg.Group,
			Step:   c.step,
			MinTag: head[0],
			MaxTag: ^head[1],
		}
	}
	if head[2] != ^head[3] || n == 0 {
		return head[2] == ^head[3], nil
	}
	if err := c.collective(ObjectCompare, OpMin, 1, false, hashes); err != nil {
		return false, fmt.Errorf(
			"object_compare on CP group %d at step %d: %w",
			c.cfg.Group,
			c.step,
			err,
		)
	}
	return true, nil
}

// minCounts reduces MIN of counts over the CP group in place: the L3 blocks every rank found for
// each request of a step. Whether a step makes this call is decided from the tree (l3exists.go,
// countBlocks), which is replicated only while the ranks agree: after a divergence one rank may
// enter it while its peers enter the step consensus, or the reverse (DESIGN.md, "Invariants"). So
// it is a consensus of its own kind over the step's vector, the same length, operation and
// transport, the counts in the words the step consensus carries them in: whichever of the two calls
// the ranks enter, they pair, and the digest in both names the divergence (consensus). It carries
// no failure and neutral frontiers, which the step consensus that follows agrees.
func (c *Core) minCounts(
	counts []uint64,
) error {
	return c.prefetchConsensus(counts, c.alloc.Digest())
}

func (c *Core) prefetchConsensus(counts []uint64, digest uint64) error {
	v := vote{
		writeFrontier:    math.MaxUint64,
		writeIdle:        true,
		loadFrontier:     math.MaxUint64,
		loadDone:         true,
		digest:           digest,
		storeFrontier:    math.MaxUint64,
		prefetchFrontier: math.MaxUint64,
		prefetchFailed:   noFailure,
		prefetchAhead:    counts,
	}
	if c.cfg.Testing.Bugs.has(BugExistenceVoteMax) {
		complement(counts) // the bug: the MAX of the counts, through the MIN of their complements
	}
	a, err := c.consensus(PrefetchCount, v)
	if err != nil {
		return err
	}
	copy(counts, a.prefetchAhead)
	if c.cfg.Testing.Bugs.has(BugExistenceVoteMax) {
		complement(counts)
	}
	return nil
}

func complement(words []uint64) {
	for i := range words {
		words[i] = ^words[i]
	}
}

// gatherDigests collects every CP rank's digest, for the divergence report. Every rank of the group
// calls it after the same agreement showed the digests differ.
func (c *Core) gatherDigests(digest uint64) ([]uint64, error) {
	all := make([]uint64, c.cfg.Geometry.CPSize)
	all[c.cfg.CPRank] = digest
	err := c.collective(DigestGather, OpGather, 0, false, all)
	return all, err
}

// OutOfStepError: the ranks of a CP group entered different consensus calls (a different kind, or a
// different number of calls so far). Their vectors were paired by MPI all the same; the tag words
// show it.
type OutOfStepError struct {
	Group          int
	Step           int64
	MinTag, MaxTag uint64
}

// Scope: every rank of the group sees the same agreed tags.
func (e *OutOfStepError) Scope() errscope.Scope { return errscope.GroupScope }

func (e *OutOfStepError) Error() string {
	return fmt.Sprintf(
		"collectives out of step in CP group %d at step %d: one rank entered the %s while another entered the %s",
		e.Group,
		e.Step,
		describeTag(e.MinTag),
		describeTag(e.MaxTag),
	)
}

// describeTag names a consensus call by its tag: its kind and its number on the communicator.
func describeTag(tag uint64) string {
	return fmt.Sprintf("%s call #%d", ConsensusKind(tag>>tagCounterBits), tag&(1<<tagCounterBits-1))
}
