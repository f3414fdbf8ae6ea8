package cache

import "github.com/cphicache/cphicache/pool"

// copyOp is one backup (device to L2) or load-back (L2 to device) of one object. Its sequence number comes from
// the replicated event stream, so it is the same on every rank; when it finished is this rank's alone, told by
// Complete (the Env reports a copy done only when every layer and payload of it is: the all-payload done gate).
type copyOp struct {
	seq      uint64
	obj      pool.ObjectID
	node     *treeNode
	tokens   []int32 // the node's tokens when the op was issued: a later split must not shift them
	startPos int
	// evictAfterCommit: a write_back backup started by an L1 eviction; the node leaves L1 once it commits.
	evictAfterCommit bool
	devicePages      []int32    // pinned until the op is retired
	slots            []SlabSlot // page i of devicePages goes with slots[i]
	isDone           bool
	err              error

	verified    bool // a load-back: checked against the content function
	failCounted bool // its failure is recorded (noteFailedCopies)
}

func (op *copyOp) done() bool { return op.isDone }

// opQueue holds the ops of one direction in sequence order and tracks the local frontier: the highest seq s
// such that every op with seq <= s is done.
type opQueue struct {
	name     string    // "backup" or "load-back", for messages
	ops      []*copyOp // in flight or done but not yet retired, ascending seq
	lastSeq  uint64    // the last seq issued
	frontier uint64
}

func (q *opQueue) push(op *copyOp) {
	q.ops = append(q.ops, op)
	q.lastSeq = op.seq
}

// advance moves the frontier over the done ops at the head of the queue. Ops past a gap stay unseen even when
// done: the frontier is a promise about every op below it.
func (q *opQueue) advance() uint64 {
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
	return q.frontier
}

// retire removes and returns the ops with seq <= upTo, which must all be done.
func (q *opQueue) retire(upTo uint64) []*copyOp {
	n := 0
	for n < len(q.ops) && q.ops[n].seq <= upTo {
		n++
	}
	out := q.ops[:n:n]
	q.ops = q.ops[n:]
	return out
}
