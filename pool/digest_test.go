package pool

import (
	"fmt"
	"testing"
)

// The digest is the only thing the ranks compare at every step (DESIGN.md, "Invariants"), so it
// must summarise the whole state: a mutation that changed the state without moving the digest, or
// two different states behind one digest, is a divergence no consensus can see.

// opPerturb is the fault injection's leak of one free slot, a mutation too (the ranks' digests must
// part).
const opPerturb = opKinds

// opNames names the operations of these tests, Perturb included.
var opNames = [...]string{
	opReserve:   "reserve",
	opCommit:    "commit",
	opRelease:   "release",
	opAbort:     "abort",
	opEvict:     "evict",
	opTouch:     "touch",
	opProtect:   "protect",
	opUnprotect: "unprotect",
	opReset:     "reset",
	opPerturb:   "perturb",
}

// digestOperation is a random operation of the model's mix, now and then a Perturb or a Reset (the
// mix has few of those).
func digestOperation(src opSource, g Geometry, event uint64, ids int) operation {
	switch src.next(200) {
	case 0, 1:
		return operation{kind: opPerturb}
	case 2:
		return operation{kind: opReset}
	}
	return randomOperation(src, g, event, ids)
}

func applyDigestOperation(a *Allocator, op operation) {
	if op.kind == opPerturb {
		a.Perturb()
		return
	}
	applyReal(a, op)
}

// TestEveryMutationMovesTheDigest: over random operations on every model geometry, an operation
// that changes the allocator's state (its StateHash, which walks every table) changes its digest,
// whatever its kind; and every kind is seen changing the state, so the test covers them all.
func TestEveryMutationMovesTheDigest(t *testing.T) {
	var changed [opKinds + 1]int
	for i, g := range everyPolicyGeometry() {
		a := mustNew(t, g)
		src := &splitmixSource{state: uint64(i) + 101}
		for event := range uint64(20_000) {
			op := digestOperation(src, g, event, 24)
			digest, state := a.Digest(), a.StateHash()
			applyDigestOperation(a, op)
			if a.StateHash() == state {
				continue
			}
			changed[op.kind]++
			if a.Digest() == digest {
				t.Fatalf(
					"geometry %d event %d: %s %+v changed the state (hash %016x -> %016x) but not the digest %016x",
					i,
					event,
					opNames[op.kind],
					op,
					state,
					a.StateHash(),
					digest,
				)
			}
		}
	}
	for kind, n := range changed {
		if n == 0 {
			t.Errorf("no %s changed the state: the test does not cover that kind", opNames[kind])
		}
	}
}

// TestEqualDigestsMeanEqualStates: over many random sequences from a fresh allocator (short ones,
// from few ids, so that histories meet), every time two allocators show the same digest their
// states hash alike. A difference is state that no mutation chains into the digest.
func TestEqualDigestsMeanEqualStates(t *testing.T) {
	for i, g := range everyPolicyGeometry() {
		stateOf := map[uint64]uint64{} // digest -> the state hash first seen with it
		// digest -> the operations that reached it first, for the message
		history := map[uint64][]string{}
		meetings := 0
		for sequence := range 3000 {
			a := mustNew(t, g)
			src := &splitmixSource{state: uint64(i)<<32 | uint64(sequence)}
			var ops []string
			for event := range uint64(12) {
				op := digestOperation(src, g, event, 4)
				applyDigestOperation(a, op)
				ops = append(
					ops,
					fmt.Sprintf("%s(%d, %d pages)", opNames[op.kind], op.id, op.pages),
				)
				d, s := a.Digest(), a.StateHash()
				first, seen := stateOf[d]
				if !seen {
					stateOf[d], history[d] = s, append([]string(nil), ops...)
					continue
				}
				meetings++
				if first != s {
					t.Fatalf(
						"geometry %d: digest %016x with two states (hash %016x after %v, %016x after %v)",
						i,
						d,
						first,
						history[d],
						s,
						ops,
					)
				}
			}
		}
		if meetings < 1000 {
			t.Errorf(
				"geometry %d: histories met only %d times: the test proves little",
				i,
				meetings,
			)
		}
	}
}
