package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/pool"
)

// The L3 tier's file I/O on one rank: the store, and a few goroutines for block writes and for
// block reads and existence checks. The core decides which blocks this rank writes, reads and looks
// for (cache.BlockWrite, cache.BlockRead, cache.ExistenceCheck); here they are done, several at
// once, and their completions go back through the completion queue in whatever order they finish
// (the core finds each by its sequence number). A read lands in a buffer of its own, is verified
// there, and is scattered into the slab by its own goroutine: the step goroutine only does the
// bookkeeping. A read that outlives its deadline (a hung filesystem) is given up, as a failed read,
// without ever writing the slab afterwards: the read goroutine and the deadline race for the read's
// state word (pendingRead.state), and only the winner acts, the read by landing, the deadline by
// telling the core.

// l3QueueJobs bounds each I/O queue: a full queue blocks the step under the watchdog's drain slot.
const l3QueueJobs = 1024

// l3Writers and l3Readers are the goroutines that run one rank's block writes, and its reads and
// existence checks: a few files in flight hide one file's open, read and close behind another's, as
// a serving engine's I/O threads do, and are few enough not to crowd the ranks of an oversubscribed
// node.
const (
	l3Writers = 2
	l3Readers = 4
)

// l3IO is one rank's L3 I/O.
type l3IO struct {
	opts   config.L3Options
	faults L3Faults // a test's faults, and validate's failed reads
	store  *l3.Store
	slabs  l3.Slabs
	seed   uint64
	place  l3Place
	log    *slog.Logger

	writeJobs, readJobs chan func()
	writers, readers    sync.WaitGroup
	// tests: closed at the end, releasing the reads faults.HangReads holds
	unhang chan struct{}
	done   *completions
	bufs   chan *[]byte // payload buffers, reused: one per read in flight at most

	reads          map[readKey]*pendingRead // started, not yet handed to the core
	readFailedSaid bool
	writeFailSaid  bool
	timeoutSaid    bool
}

type readKey struct {
	prefetch uint64
	block    int
}

// pendingRead is a read in flight: its deadline, and the state word its goroutine and its deadline
// race for.
type pendingRead struct {
	read     *cache.BlockRead
	issued   time.Time // when the core started it: its latency runs from here to its landing
	deadline time.Time // zero: none (wait_complete waits under the watchdog)
	state    atomic.Int32
}

// A read's states: in flight; landing (its goroutine won: it writes the slab, then posts its
// completion); given up (its deadline won: the core was told of a failed read, and the goroutine
// writes nothing).
const (
	readInFlight int32 = iota
	readLanding
	readAbandoned
)

// readDone is a read's result, for the step goroutine.
type readDone struct {
	key    readKey
	landed time.Time // when its goroutine finished with it (verified and scattered, or failed)
	bytes  int64     // the verified payload's, landed in the slab; 0 on an error
	err    error
}

// l3Place is where a rank's L3 I/O lies in its CP group: its node's index among the group's nodes,
// its node-local part, and the CP ranks whose parts its node's block files hold, by part (every CP
// rank on one node).
type l3Place struct {
	node, part int
	partRanks  []int
}

// newL3IO opens the store of the rank's node's block files; nothing is shared yet, so a failure
// leaves nothing behind. Each node's part 0 keeps the budget of its node's files (the group's CP
// rank 0 on one node): its 1/k share of --l3-bytes on a group over k nodes, so that the group's
// whole blocks fit --l3-bytes whatever k is.
func newL3IO(
	o config.L3Options,
	faults L3Faults,
	g pool.Geometry,
	seed uint64,
	place l3Place,
	log *slog.Logger,
	done *completions,
) (*l3IO, error) {
	budget := l3.Unbounded // only the keeper evicts (and scans the directory at start)
	if place.part == 0 {
		budget = max(1, o.Store()/int64(max(1, g.Nodes)))
	}
	var fsys l3.FS = l3.OSFS{}
	if faults.FS != nil {
		fsys = faults.FS
	}
	if faults.ReadOnly {
		fsys = l3.ReadOnlyFS{FS: fsys}
	}
	store, err := l3.OpenPart(fsys, o.Dir, o.BlockNamespace(g, seed), place.node, budget)
	if err != nil {
		return nil, err
	}
	if store.ReadOnly() && place.part == 0 {
		log.Warn(
			"the L3 directory is read-only: its blocks are served, none is written (counted in l3.writes_skipped)",
			"dir",
			o.Dir,
		)
	}
	if faults.FailWrites {
		store.FailWritesForTest(errors.New("no space left on device (injected)"))
	}
	t := &l3IO{
		opts:   o,
		faults: faults,
		store:  store,
		seed:   seed,
		place:  place,
		log:    log,
		done:   done,
		reads:  map[readKey]*pendingRead{},
		writeJobs: make(
			chan func(),
			l3QueueJobs,
		),
		readJobs: make(chan func(), l3QueueJobs),
		bufs:     make(chan *[]byte, l3QueueJobs),
		unhang:   make(chan struct{}),
	}
	for _, w := range []struct {
		jobs chan func()
		wg   *sync.WaitGroup
		n    int
	}{{t.writeJobs, &t.writers, l3Writers}, {t.readJobs, &t.readers, l3Readers}} {
		for range w.n {
			w.wg.Add(1)
			go func() {
				defer w.wg.Done()
				for job := range w.jobs {
					job()
				}
			}()
		}
	}
	return t, nil
}

// attachSlabs gives the tier the mapped L2, once the slab exists.
func (t *l3IO) attachSlabs(
	g pool.Geometry,
	mem [][]byte,
) {
	t.slabs = l3.Slabs{Geometry: g, Mem: mem}
}

// l3CloseReadGrace bounds how long the end of a run waits for a read still in the filesystem: reads
// write only their own buffers, so one that hangs (a dead NFS server) is left behind rather than
// hanging the job's end.
const l3CloseReadGrace = 2 * time.Second

// close waits for the writes queued so far (they read the slab, which must still be mapped) and, a
// while, for the reads.
func (t *l3IO) close() {
	close(t.writeJobs)
	close(t.readJobs)
	close(t.unhang)
	t.writers.Wait()
	done := make(chan struct{})
	go func() {
		t.readers.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(l3CloseReadGrace):
		t.log.Warn(
			"an L3 read still had not returned at the end of the run: left behind (it writes no shared memory)",
		)
	}
}

func (t *l3IO) buffer() *[]byte {
	select {
	case b := <-t.bufs:
		return b
	default:
		return new([]byte)
	}
}

func (t *l3IO) release(b *[]byte) {
	select {
	case t.bufs <- b:
	default:
	}
}

// write is the writer rank's I/O for one block, on the write goroutine: gather the parts its node's
// file holds (every rank's on one node), check them against the content of the block's tokens (the
// commit audit, extended to the L3: a wrong block fails the job that made it, and is never
// published for the next job to load), and publish it, unless a block is there already (an earlier
// job, or another group sharing the directory, stored it).
func (t *l3IO) write(w *cache.BlockWrite, buf *[]byte) doneWork {
	res := doneWork{Completion: cache.Completion{Kind: cache.BlockWritten, Seq: w.Seq}}
	if t.faults.SlowWrites {
		time.Sleep(2 * time.Millisecond)
	}
	if t.store.Exists(w.Key) {
		return res
	}
	if t.store.ReadOnly() {
		res.skipped = true // nothing to gather: the directory takes no block
		return res
	}
	payload, err := t.store.GatherFromSlab(w.Pages, t.slabs, buf)
	if err == nil && t.faults.CorruptGathered {
		// as if another rank's copy had reused a slot under the gather
		payload[len(payload)/2] ^= 0x01
	}
	if err == nil && !blockMatches(payload, w, t.store.Namespace(), t.seed, t.place.partRanks) {
		res.Err = fmt.Errorf(
			"%w: block %016x (tokens %d..%d)",
			cache.ErrBlockMismatch,
			w.Key,
			w.StartPos,
			w.StartPos+len(w.Tokens)-1,
		)
		return res
	}
	if err == nil {
		err = t.store.Write(w.Key, len(w.Tokens), payload, t.opts.Fsync)
	}
	if res.Err = err; err == nil {
		res.writtenBytes = int64(len(payload))
	}
	return res
}

// blockMatches checks a gathered block file, every layer's and payload's part of every page of each
// of the ranks it holds (partRanks: the CP rank of each of its parts, in order), against the
// content function.
func blockMatches(
	payload []byte,
	w *cache.BlockWrite,
	ns l3.Namespace,
	seed uint64,
	partRanks []int,
) bool {
	tokenCount := len(w.Tokens)
	partBytes := int64(ns.PageTokens) * int64(ns.TokenBytes)
	if len(partRanks) != ns.FileParts() {
		return false
	}
	for part, rank := range partRanks {
		for layer := range ns.Layers {
			for p := range ns.Payloads {
				base := ns.PartOffset(tokenCount, part, layer, p)
				key := cache.ContentKey{Seed: seed, Rank: rank, Layer: layer, Payload: p}
				for page := range tokenCount / ns.PageTokens {
					got := payload[base+int64(page)*partBytes : base+int64(page+1)*partBytes]
					first := page * ns.PageTokens
					if !cache.PartMatches(
						got,
						w.Tokens[first:first+ns.PageTokens],
						w.StartPos+first,
						ns.TokenBytes,
						key,
					) {
						return false
					}
				}
			}
		}
	}
	return true
}

// check is an existence check, on a read goroutine: how many of its keys, from the first, are there
// (tests may hide every block whose key is 0 mod 3, as a shared filesystem whose view lags would).
func (t *l3IO) check(c *cache.ExistenceCheck) doneWork {
	found := 0
	for found < len(c.Keys) && !(t.faults.HideBlocks && c.Keys[found]%3 == 0) && t.store.Exists(c.Keys[found]) {
		found++
	}
	return doneWork{Completion: cache.Completion{Kind: cache.BlocksFound, Seq: c.Seq, Found: found}}
}

// read is a reader rank's I/O for one block of a prefetch, on a read goroutine: into a buffer of
// its own, verified, then scattered into the slab unless its deadline gave it up first.
func (t *l3IO) read(p *pendingRead) doneWork {
	r := p.read
	if t.faults.SlowReads {
		time.Sleep(2 * time.Millisecond)
	}
	if t.faults.HangReads {
		<-t.unhang // as a read in a hung filesystem: it returns only at the end of the run
	}
	res := &readDone{key: readKey{r.Prefetch, r.Block}, err: errInjectedRead}
	done := doneWork{
		Completion: cache.Completion{Kind: cache.BlockReadDone, Seq: r.Prefetch, Block: r.Block},
		read:       res,
	}
	buf := t.buffer()
	defer t.release(buf)
	var data []byte
	if !t.faults.FailReads {
		data, res.err = t.store.ReadBlock(r.Key, len(r.Pages), buf)
	}
	if !p.state.CompareAndSwap(readInFlight, readLanding) {
		return done // given up at its deadline: the core knows; nothing may touch the slab now
	}
	if res.err == nil {
		res.err = t.store.ScatterIntoSlab(data, r.Pages, t.slabs)
	}
	if res.err == nil {
		res.bytes = int64(len(data))
	}
	res.landed = time.Now()
	done.Err = res.err
	return done
}

var errInjectedRead = errors.New("injected L3 read failure")

// errReadDeadline is a read given up at its deadline.
var errReadDeadline = errors.New("the L3 read did not finish by its deadline")

// readDeadline is when a read of a prefetch of tokens tokens is given up, by policy: the timeout
// policy's deadline, and the same for best_effort (which never waits, but must not hold the
// prefetch's L2 object forever); wait_complete waits under the watchdog instead. A deadline never
// goes past half the watchdog's timeout, so that the deadline, not the watchdog, ends a hung read.
func readDeadline(
	p cache.PrefetchPolicy,
	tokens int,
	watchdog time.Duration,
	now time.Time,
) time.Time {
	if p == cache.PrefetchWaitComplete {
		return time.Time{}
	}
	d := prefetchTimeout(tokens)
	if watchdog > 0 {
		d = min(d, watchdog/2)
	}
	return now.Add(d)
}

// l3Faults are the L3 store's faults on this rank: a test's (Testing.L3), and validate's failed
// reads (Pass.FailL3Reads).
func (rs *runState) l3Faults() L3Faults {
	f := rs.testing.L3
	f.FailReads = f.FailReads || rs.pass.FailL3Reads
	return f
}
