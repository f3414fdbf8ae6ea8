package pool

import "slices"

// The operations the model tests replay on both allocators, and the sources that choose them.

type opKind uint8

const (
	opReserve opKind = iota
	opCommit
	opRelease
	opAbort
	opEvict
	opTouch
	opProtect
	opUnprotect
	opReset
	opKinds
)

type operation struct {
	kind       opKind
	id         ObjectID
	pages      int
	seq, clock uint64
	// a Reserve through ReserveAdmitted, naming its content by key (admit_seen's geometries only)
	keyed bool
	key   uint64
}

type opResult struct {
	outcome Outcome
	evicted []ObjectID
	err     error
}

// applyReal runs one operation on the real allocator.
func applyReal(a *Allocator, op operation) opResult {
	var err error
	switch op.kind {
	case opReserve:
		reserve := a.Reserve
		if op.keyed {
			reserve = func(id ObjectID, pages int, seq, clock uint64) (Outcome, error) {
				return a.ReserveAdmitted(id, pages, seq, clock, op.key)
			}
		}
		outcome, err := reserve(op.id, op.pages, op.seq, op.clock)
		// misuse changes nothing: Evicted still lists the last successful call's evictions
		if err != nil {
			return opResult{outcome: outcome, err: err}
		}
		return opResult{outcome: outcome, evicted: slices.Clone(a.Evicted()), err: err}
	case opCommit:
		err = a.MarkObjectCommitted(op.id)
	case opRelease:
		err = a.Release(op.id)
	case opAbort:
		err = a.Abort(op.id)
	case opEvict:
		err = a.Evict(op.id)
	case opTouch:
		err = a.Touch(op.id, op.clock)
	case opProtect:
		err = a.Protect(op.id)
	case opUnprotect:
		err = a.Unprotect(op.id)
	case opReset:
		a.Reset()
	}
	return opResult{err: err}
}

// opSource yields small numbers: from a seeded generator, or from fuzz bytes.
type opSource interface {
	next(n int) int // in [0, n)
	done() bool
}

// splitmixSource is a test-only deterministic generator (the package itself uses no randomness).
type splitmixSource struct{ state uint64 }

func (s *splitmixSource) next(n int) int {
	s.state += 0x9e3779b97f4a7c15
	return int(Mix64(s.state) % uint64(n))
}
func (s *splitmixSource) done() bool { return false }

type bytesSource struct{ data []byte }

func (s *bytesSource) next(n int) int {
	if len(s.data) < 2 {
		s.data = nil
		return 0
	}
	v := int(s.data[0])<<8 | int(s.data[1])
	s.data = s.data[2:]
	return v % n
}
func (s *bytesSource) done() bool { return len(s.data) == 0 }

// randomOperation draws an operation that mostly makes sense (ids from a small set, so duplicates,
// unknown ids and repeated commits happen), with resets rare so that states grow full and
// fragmented.
func randomOperation(src opSource, g Geometry, event uint64, ids int) operation {
	// Several events share a clock value, so LRU ties (broken by id) are common.
	op := operation{id: ObjectID(src.next(ids)), seq: event, clock: event / 8}
	switch roll := src.next(100); {
	case roll < 35:
		op.kind = opReserve
		op.pages = 1 + src.next(max(1, g.Slots/4))
		if src.next(50) == 0 {
			op.pages = src.next(g.Slots+3) - 1 // sometimes invalid: <= 0 or > Slots
		}
		// Keys from a set smaller than the ids, so that contents recur; drawn only where a policy
		// admits, so that the other geometries' streams are the ones they always were.
		if g.Policy.Admits() && src.next(4) != 0 {
			op.keyed, op.key = true, uint64(src.next(ids/2+1))
		}
	case roll < 55:
		op.kind = opCommit
	case roll < 65:
		op.kind = opRelease
	case roll < 72:
		op.kind = opAbort
	case roll < 77:
		op.kind = opEvict
	case roll < 87:
		op.kind = opTouch
		op.clock = uint64(src.next(int(event/8) + 1)) // clocks may repeat and go back: ties by id
	case roll < 93:
		op.kind = opProtect
	case roll < 99 || src.next(200) != 0:
		op.kind = opUnprotect
	default:
		op.kind = opReset
	}
	return op
}
