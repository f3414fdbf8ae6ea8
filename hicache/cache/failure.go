package cache

import (
	"errors"
	"fmt"
)

// Rank-local failures and how a CP group learns them. A failure on one rank (a page copy that
// failed, a device write, a broken invariant) is not returned at once: a rank that left now would
// leave its peers waiting in the next collective until the watchdog ends the job, with a message
// about that collective rather than the cause. The failure is put in the error word of the rank's
// next consensus instead, and every rank of the group learns it in that same call: the failing rank
// returns its own error (and its message is the one the job prints), the others a *PeerFailure that
// names it.

// FailureCode says what kind of failure travels in a consensus's error word.
type FailureCode uint32

const (
	FailureInternal FailureCode = iota + 1 // anything else
	FailureCopy                            // a page copy between the device and the slab failed
	FailureDevice                          // writing or reading device KV memory failed
	// the allocator refused an operation the controller relies on
	FailureAllocator
	// a controller invariant checked between steps is broken
	FailureInvariant
	FailureFlush   // a flush left the cache unlike a fresh one
	FailureMetrics // a periodic --metrics-file write failed (world rank 0)
	// the serving clock's model priced a step longer than any run can spend
	// (serving.MaxStepSeconds)
	FailureModel
)

var failureNames = map[FailureCode]string{
	FailureInternal: "internal error", FailureCopy: "page copy error", FailureDevice: "device memory error",
	FailureAllocator: "allocator error", FailureInvariant: "broken invariant", FailureFlush: "flush left the cache unlike a fresh one",
	FailureMetrics: "metrics file write failed", FailureModel: "modelled step too long",
}

func (c FailureCode) String() string {
	if name, ok := failureNames[c]; ok {
		return name
	}
	return fmt.Sprintf("failure code %d", uint32(c))
}

// LocalFailure is one rank's failure, waiting for its group's next consensus.
type LocalFailure struct {
	Code FailureCode
	Err  error
}

func (e *LocalFailure) Error() string { return e.Err.Error() }
func (e *LocalFailure) Unwrap() error { return e.Err }

func failureCodeOf(err error) FailureCode {
	var lf *LocalFailure
	if errors.As(err, &lf) {
		return lf.Code
	}
	return FailureInternal
}

// PeerFailure is what the other ranks of a CP group return when one of them failed: its CP rank and
// the kind of failure. The failing rank prints the cause itself.
type PeerFailure struct {
	Group, CPRank int
	Code          FailureCode
	Step          int64
}

func (e *PeerFailure) Error() string {
	return fmt.Sprintf(
		"CP rank %d of CP group %d failed at step %d (%s); its own message names the cause",
		e.CPRank,
		e.Group,
		e.Step,
		e.Code,
	)
}

// EchoesPeer: the failing rank prints the cause; this rank only relays it (spmd.AgreeOnFailure).
func (e *PeerFailure) EchoesPeer() bool { return true }
