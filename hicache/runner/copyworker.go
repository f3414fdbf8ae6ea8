package runner

import (
	"fmt"
	"sync"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/timeline"
	"github.com/cphicache/cphicache/kernels"
)

// The rank's copies between device memory and the shared slab, run on one goroutine in order, as
// one CUDA stream would: copies overlap the step's logic and the collectives, but not each other.
// Each copy is one cache.Copy, split by layer; it is reported done (to the core, through the
// completion queue) when every layer and payload of it is: the all-payload done gate.

// copyEngine is what the runner needs from kernels/: page copies between the device KV buffer and
// the slab, and host staging of device content. kernels.HostEngine (CPU build) and
// kernels.CUDAEngine (cuda build) have it.
type copyEngine interface {
	Gather(spans []kernels.Span) error
	Scatter(spans []kernels.Span) error
	WriteDevice(offsetBytes int64, src []byte) error
	ReadDevice(offsetBytes int64, dst []byte) error
}

// copyQueueTasks bounds the copies (one layer of one op each) queued for the copy worker. When the
// worker falls behind, submitting blocks the step until it catches up: backpressure, as a full copy
// stream gives a serving engine, instead of an unbounded backlog of pinned device pages. It is a
// timing matter only: decisions depend on what writing_check commits, which every rank agrees on.
const copyQueueTasks = 64

// copyJob is one cache.Copy on its way through the worker.
type copyJob struct {
	seq        uint64
	gather     bool
	spans      [][]kernels.Span // per layer
	layersLeft int              // the worker's alone
	err        error
	timing     *copyTiming // --timeline's span of the copy; nil when not recorded
}

// copyTask is one layer of one job.
type copyTask struct {
	job   *copyJob
	layer int
}

// completions is the queue from the worker goroutines (copies, L3 I/O) to the step goroutine, which
// hands each to the core. It holds at most one entry per piece of work in flight, which the bounded
// queues and the device pages bound; notify wakes a waiting step goroutine.
type completions struct {
	mu      sync.Mutex
	pending []doneWork
	notify  chan struct{}
}

// doneWork is a finished piece of work: the core's completion, and for an L3 read the verified
// payload, which the step goroutine scatters into the slab (nothing else writes it behind the
// core's back).
type doneWork struct {
	cache.Completion
	read         *readDone
	writtenBytes int64 // a block write's payload, 0 when the block was there already
	skipped      bool  // a block write the read-only directory skipped
}

func newCompletions() *completions { return &completions{notify: make(chan struct{}, 1)} }

func (q *completions) post(d doneWork) {
	q.mu.Lock()
	q.pending = append(q.pending, d)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// take returns what has finished since the last take, into buf.
func (q *completions) take(buf []doneWork) []doneWork {
	q.mu.Lock()
	defer q.mu.Unlock()
	buf = append(buf[:0], q.pending...)
	clear(q.pending)
	q.pending = q.pending[:0]
	return buf
}

// copyWorker runs the copies of one rank in order until tasks is closed.
func copyWorker(engine copyEngine, tasks <-chan copyTask, done *completions) {
	for t := range tasks {
		if t.layer == 0 {
			t.job.timing.began()
		}
		var err error
		if t.job.gather {
			err = engine.Gather(t.job.spans[t.layer])
		} else {
			err = engine.Scatter(t.job.spans[t.layer])
		}
		if err != nil && t.job.err == nil {
			t.job.err = err
		}
		if t.job.layersLeft--; t.job.layersLeft < 0 {
			panic(
				fmt.Sprintf(
					"hicache: broken invariant: copy %d ran layer %d after its last (%d layers)",
					t.job.seq,
					t.layer,
					len(t.job.spans),
				),
			)
		}
		if t.job.layersLeft == 0 {
			t.job.timing.done()
			done.post(
				doneWork{
					Completion: cache.Completion{
						Kind: cache.CopyDone,
						Seq:  t.job.seq,
						Err:  t.job.err,
					},
				},
			)
		}
	}
}

func offer(jobs chan func(), job func()) bool {
	select {
	case jobs <- job:
		return true
	default:
		return false
	}
}

// enqueue retries put until it takes the work, delivering completions meanwhile: it waits on the
// worker taking the next job, bounded by the drain slot (waits.go).
func (rs *runState) enqueue(name, hint string, put func() bool) {
	if put() {
		return
	}
	if rs.tl.On() {
		defer rs.tl.End(timeline.KindWait, rs.tl.Name(name), rs.tl.Now(), 0)
	}
	rs.localWait(name, hint, put)
}
