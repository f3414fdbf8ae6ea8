package kernels

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

const (
	// hostChunkMinBytes is the smallest piece of work handed to a worker: waking a goroutine costs
	// a few microseconds, which is what a memmove of about 64 KiB costs, so smaller pieces would
	// cost more than they gain. A call whose total is under two chunks runs on the calling
	// goroutine alone.
	hostChunkMinBytes = 64 << 10
	// hostChunksPerWorker splits a call into about this many pieces per worker, so that a worker
	// delayed by another process (the cores are shared) leaves its remaining pieces to the others.
	hostChunksPerWorker = 4
	// hostWorkersMax bounds the worker goroutines whatever the caller asks for.
	hostWorkersMax = 256
)

// HostEngine is the CPU build's engine: the device KV buffer is a Go []byte that the engine
// allocates, and the copies are copy() (memmove) calls on persistent worker goroutines. After
// warm-up a call allocates nothing: the coalesced span list and its prefix sums live in buffers
// that only grow.
type HostEngine struct {
	// serializes calls: the scratch buffers and the work state below are per call
	mu        sync.Mutex
	device    []byte
	slabs     [][]byte
	slabBytes []int64
	workers   int
	wake      []chan struct{} // one per helper worker (workers-1 of them); closed by Close
	done      sync.WaitGroup
	closed    bool

	// Per-call work state, written before the helpers are woken (the channel send orders it) and
	// read-only while they run.
	spans []Span // the caller's spans, coalesced
	// prefix[i] = bytes of spans[:i]; strictly increasing since zero-length spans are dropped
	prefix     []int64
	totalBytes int64
	chunkBytes int64
	gather     bool
	nextChunk  atomic.Int64 // index of the next chunk to claim
}

var _ Engine = (*HostEngine)(nil)

// NewHostEngine allocates a device buffer of deviceBytes and starts the worker goroutines; workers
// <= 0 means GOMAXPROCS. The slabs are used in place (they are the shared L2 mapping) and must
// outlive the engine.
func NewHostEngine(deviceBytes int64, slabs [][]byte, workers int) (*HostEngine, error) {
	if deviceBytes < 0 {
		return nil, fmt.Errorf("kernels: device buffer of %d bytes", deviceBytes)
	}
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, hostWorkersMax)
	e := &HostEngine{
		device:    make([]byte, deviceBytes),
		slabs:     slabs,
		slabBytes: slabSizes(slabs),
		workers:   workers,
		wake:      make([]chan struct{}, workers-1),
	}
	for i := range e.wake {
		e.wake[i] = make(chan struct{}, 1)
		go e.helper(e.wake[i])
	}
	return e, nil
}

// Name returns "host".
func (e *HostEngine) Name() string { return KindHost }

// DeviceBytes returns the size of the device buffer.
func (e *HostEngine) DeviceBytes() int64 { return int64(len(e.device)) }

// Device is the device buffer itself, for a caller that fills and checks device content in place
// instead of staging it through WriteDevice and ReadDevice (the CPU build's "GPU memory" is host
// memory). The caller must not touch pages a copy in flight reads or writes; the cache's reference
// rule already holds it to that.
func (e *HostEngine) Device() []byte { return e.device }

// Workers returns the number of goroutines (the caller's included) a large call copies on.
func (e *HostEngine) Workers() int { return e.workers }

// Gather copies device -> slab for every span (the D2H backup direction).
func (e *HostEngine) Gather(spans []Span) error { return e.run(spans, true) }

// Scatter copies slab -> device for every span (the H2D load-back direction).
func (e *HostEngine) Scatter(spans []Span) error { return e.run(spans, false) }

// WriteDevice copies src into the device buffer at offsetBytes.
func (e *HostEngine) WriteDevice(offsetBytes int64, src []byte) error {
	if err := checkStaging("WriteDevice", offsetBytes, len(src), e.DeviceBytes()); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	copy(e.device[offsetBytes:], src)
	return nil
}

// ReadDevice copies the device buffer at offsetBytes into dst.
func (e *HostEngine) ReadDevice(offsetBytes int64, dst []byte) error {
	if err := checkStaging("ReadDevice", offsetBytes, len(dst), e.DeviceBytes()); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	copy(dst, e.device[offsetBytes:])
	return nil
}

// Close stops the workers and drops the device buffer. A second Close is a no-op.
func (e *HostEngine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	for _, w := range e.wake {
		close(w)
	}
	e.device = nil
	return nil
}

// run validates, coalesces and copies one span list in the given direction.
func (e *HostEngine) run(spans []Span, gather bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("kernels: engine is closed")
	}
	if _, err := validateSpans(spans, int64(len(e.device)), e.slabBytes); err != nil {
		return err
	}
	e.prepare(spans, gather)
	helpers := e.helpersFor()
	e.done.Add(helpers)
	for _, w := range e.wake[:helpers] {
		w <- struct{}{}
	}
	e.work()
	e.done.Wait()
	return nil
}

// prepare copies the caller's spans into the scratch buffer (the caller's slice is left as it was),
// coalesces them and builds the prefix sums that map a byte of the whole call to its span.
func (e *HostEngine) prepare(spans []Span, gather bool) {
	e.spans = Coalesce(append(e.spans[:0], spans...))
	e.prefix = e.prefix[:0]
	var total int64
	for _, s := range e.spans {
		e.prefix = append(e.prefix, total)
		total += s.Bytes
	}
	e.totalBytes = total
	e.gather = gather
	e.chunkBytes = max(hostChunkMinBytes, total/int64(e.workers*hostChunksPerWorker))
	e.nextChunk.Store(0)
}

// helpersFor returns how many helper workers this call deserves: none when it is small.
func (e *HostEngine) helpersFor() int {
	chunks := (e.totalBytes + e.chunkBytes - 1) / e.chunkBytes
	return int(max(0, min(chunks-1, int64(len(e.wake)))))
}

// helper is one worker goroutine: each wake-up it copies chunks until none is left.
func (e *HostEngine) helper(wake <-chan struct{}) {
	for range wake {
		e.work()
		e.done.Done()
	}
}

// work claims chunks of the call until none is left and copies them.
func (e *HostEngine) work() {
	for {
		lo := e.nextChunk.Add(1) - 1
		start := lo * e.chunkBytes
		if start >= e.totalBytes {
			return
		}
		e.copyRange(start, min(start+e.chunkBytes, e.totalBytes))
	}
}

// copyRange copies bytes [lo, hi) of the call, counted over the coalesced spans laid end to end.
func (e *HostEngine) copyRange(lo, hi int64) {
	for i := e.spanAt(lo); lo < hi; i++ {
		s := e.spans[i]
		within := lo - e.prefix[i]
		n := min(s.Bytes-within, hi-lo)
		dev := e.device[s.DeviceOffsetBytes+within : s.DeviceOffsetBytes+within+n]
		slab := e.slabs[s.Slab][s.SlabOffsetBytes+within : s.SlabOffsetBytes+within+n]
		if e.gather {
			copy(slab, dev)
		} else {
			copy(dev, slab)
		}
		lo += n
	}
}

// spanAt returns the index of the span holding byte pos of the call: the last i with prefix[i] <=
// pos.
func (e *HostEngine) spanAt(pos int64) int {
	lo, hi := 0, len(e.prefix) // invariant: prefix[lo] <= pos, and prefix[hi] > pos where hi < len
	for hi-lo > 1 {
		mid := int(uint(lo+hi) >> 1)
		if e.prefix[mid] <= pos {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo
}
