package cache

import (
	"fmt"
	"strings"

	"github.com/cphicache/cphicache/pool"
)

// copyOp is one backup (device to L2) or load-back (L2 to device) of one object. Its sequence
// number comes from the replicated event stream, so it is the same on every rank; when it finished
// is this rank's alone, told by Complete (the Env reports a copy done only when every layer and
// payload of it is: the all-payload done gate).
type copyOp struct {
	seq      uint64
	obj      pool.ObjectID
	node     *treeNode
	tokens   []int32 // the node's tokens when the op was issued: a later split must not shift them
	startPos int
	// evictAfterCommit: a write_back backup started by an L1 eviction; the node leaves L1 once it
	// commits.
	evictAfterCommit bool
	devicePages      []int32    // pinned until the op is retired
	slots            []SlabSlot // page i of devicePages goes with slots[i]
	isDone           bool
	err              error

	verified    bool   // a load-back: checked against the content function
	failCounted bool   // its failure is recorded (noteFailedCopies)
	key         uint64 // a backup's admission key, under a policy that admits (backup.go)
}

func (op *copyOp) done() bool { return op.isDone }

// opQueue holds the ops of one direction in sequence order and tracks the local frontier: the
// highest seq s such that every op with seq <= s is done.
type opQueue struct {
	name     string    // "backup" or "load-back", for messages
	ops      []*copyOp // in flight or done but not yet retired, ascending seq
	lastSeq  uint64    // the last seq issued
	frontier uint64
}

// push appends an op just issued: sequence numbers come from one counter, so they ascend.
func (q *opQueue) push(op *copyOp) {
	if op.seq <= q.lastSeq || op.isDone {
		panic(
			q.broken(
				"%s %d pushed after %d, or done before it started (%v)",
				q.name,
				op.seq,
				q.lastSeq,
				op.isDone,
			),
		)
	}
	q.ops = append(q.ops, op)
	q.lastSeq = op.seq
}

// advance moves the frontier over the done ops at the head of the queue. Ops past a gap stay unseen
// even when done: the frontier is a promise about every op below it, so it never moves back nor
// past the last op issued.
func (q *opQueue) advance() uint64 {
	before := q.frontier
	i := 0
	for _, op := range q.ops {
		if op.seq <= q.frontier {
			i++
			continue
		}
		if !op.done() {
			break
		}
		q.frontier = op.seq
		i++
	}
	if len(q.ops) == 0 || i == len(q.ops) {
		q.frontier = q.lastSeq
	}
	if q.frontier < before || q.frontier > q.lastSeq {
		panic(
			q.broken(
				"%s frontier moved from %d to %d (last issued %d)",
				q.name,
				before,
				q.frontier,
				q.lastSeq,
			),
		)
	}
	return q.frontier
}

// retire removes and returns the ops with seq <= upTo, which must all be done: upTo is a frontier
// the group agreed, at most this rank's own.
func (q *opQueue) retire(upTo uint64) []*copyOp {
	n := 0
	for n < len(q.ops) && q.ops[n].seq <= upTo {
		if !q.ops[n].done() {
			panic(
				q.broken(
					"%s %d retired at the agreed frontier %d before it finished",
					q.name,
					q.ops[n].seq,
					upTo,
				),
			)
		}
		n++
	}
	out := q.ops[:n:n]
	q.ops = q.ops[n:]
	return out
}

// broken is a broken invariant of the queue, with its dump.
func (q *opQueue) broken(format string, args ...any) string {
	return "cache: broken invariant: " + fmt.Sprintf(format, args...) + "\n" + q.dump()
}

// dump describes the queue: its counters and its first ops, bounded.
func (q *opQueue) dump() string {
	var b strings.Builder
	fmt.Fprintf(
		&b,
		"%s queue: last issued %d, frontier %d, %d ops:",
		q.name,
		q.lastSeq,
		q.frontier,
		len(q.ops),
	)
	for _, op := range q.ops[:min(len(q.ops), 8)] {
		fmt.Fprintf(
			&b,
			" %d(done %v, object %d, %d pages)",
			op.seq,
			op.isDone,
			op.obj,
			len(op.devicePages),
		)
	}
	b.WriteString("\n")
	return b.String()
}
