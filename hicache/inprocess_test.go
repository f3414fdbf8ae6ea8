package hicache

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/mpi"
)

// A CP group of N ranks in one process: each rank a goroutine with its own controller, copy engine and
// consensus, all over one in-memory communicator and one set of slabs, as the ranks of a node share the
// POSIX shared-memory slab. It lets the controller be tested against a model without MPI.

// memCallTimeout bounds one collective: a rank that never arrives is a test failure, not a hung test.
const memCallTimeout = 30 * time.Second

// memGroup is the shared state of an in-memory communicator: a reusable barrier that reduces or gathers
// what every rank brought when the last one arrives.
type memGroup struct {
	n       int
	mu      sync.Mutex
	cond    *sync.Cond
	arrived int
	gen     uint64 // completed calls; a waiter leaves when it moves
	calls   []memCall
	results [][]uint64 // per rank, of the last completed call
	err     error      // of the last completed call
	aborted error      // set once: every present and future call fails with it
}

// memCall is what one rank brings to a collective: enough to tell ranks that entered different calls apart.
type memCall struct {
	what         string // "allreduce" or "allgather"
	op           mpi.Op
	send         []uint64
	sendN, recvN int
}

func newMemGroup(n int) *memGroup {
	g := &memGroup{n: n, calls: make([]memCall, n), results: make([][]uint64, n)}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// comm is rank r's view of the group.
func (g *memGroup) comm(r int) *memComm { return &memComm{g: g, rank: r} }

// abort wakes every rank waiting in a collective with err: a rank that left the step loop early must not
// leave the others waiting for it.
func (g *memGroup) abort(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborted == nil {
		g.aborted = err
	}
	g.cond.Broadcast()
}

// enter blocks until every rank has brought its part of this call, and returns this rank's result. The
// result of call k is only overwritten when call k+1 completes, which needs this rank to have entered it,
// so reading it after the wake-up is safe.
func (g *memGroup) enter(rank int, call memCall) ([]uint64, error) {
	timer := time.AfterFunc(memCallTimeout, func() {
		g.abort(fmt.Errorf("in-memory collective: rank %d waited over %v for the others", rank, memCallTimeout))
	})
	defer timer.Stop()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.aborted != nil {
		return nil, g.aborted
	}
	call.send = slices.Clone(call.send)
	g.calls[rank] = call
	g.arrived++
	gen := g.gen
	if g.arrived == g.n {
		g.results, g.err = g.reduce()
		g.arrived = 0
		g.gen++
		g.cond.Broadcast()
	}
	for g.gen == gen && g.aborted == nil {
		g.cond.Wait()
	}
	if g.gen == gen {
		return nil, g.aborted
	}
	if g.err != nil {
		return nil, g.err
	}
	return g.results[rank], nil
}

// reduce checks that every rank entered the same call with vectors of the same length, then computes each
// rank's result. A mismatch is an error on every rank: MPI would pair the calls and read past a buffer.
func (g *memGroup) reduce() ([][]uint64, error) {
	first := g.calls[0]
	for r, c := range g.calls {
		if c.what != first.what || c.op != first.op || c.sendN != first.sendN || c.recvN != first.recvN {
			return nil, fmt.Errorf("in-memory collective mismatch: rank 0 entered %s(%v, send %d, recv %d), rank %d %s(%v, send %d, recv %d)",
				first.what, first.op, first.sendN, first.recvN, r, c.what, c.op, c.sendN, c.recvN)
		}
	}
	var out []uint64
	switch first.what {
	case "allreduce":
		if first.recvN != first.sendN {
			return nil, fmt.Errorf("in-memory allreduce: send %d words, recv %d", first.sendN, first.recvN)
		}
		out = slices.Clone(first.send)
		for _, c := range g.calls[1:] {
			for i, v := range c.send {
				out[i] = combine(first.op, out[i], v)
			}
		}
	case "allgather":
		if first.recvN != first.sendN*g.n {
			return nil, fmt.Errorf("in-memory allgather: send %d words, recv %d, want %d", first.sendN, first.recvN, first.sendN*g.n)
		}
		for _, c := range g.calls {
			out = append(out, c.send...)
		}
	}
	results := make([][]uint64, g.n)
	for r := range results {
		results[r] = slices.Clone(out)
	}
	return results, nil
}

func combine(op mpi.Op, a, b uint64) uint64 {
	switch op {
	case mpi.Min:
		return min(a, b)
	case mpi.Max:
		return max(a, b)
	}
	return a + b
}

// memComm is one rank's groupComm.
type memComm struct {
	g    *memGroup
	rank int
}

func (c *memComm) Size() int { return c.g.n }
func (c *memComm) Rank() int { return c.rank }

func (c *memComm) AllreduceUint64(send, recv []uint64, op mpi.Op) error {
	if op != mpi.Min && op != mpi.Max && op != mpi.Sum {
		return fmt.Errorf("in-memory allreduce: unsupported op %v", op)
	}
	out, err := c.g.enter(c.rank, memCall{what: "allreduce", op: op, send: send, sendN: len(send), recvN: len(recv)})
	if err == nil {
		copy(recv, out)
	}
	return err
}

func (c *memComm) AllgatherUint64(send, recv []uint64) error {
	out, err := c.g.enter(c.rank, memCall{what: "allgather", send: send, sendN: len(send), recvN: len(recv)})
	if err == nil {
		copy(recv, out)
	}
	return err
}

// skipUnlessOneRank keeps the in-process tests to one run: under mpirun every rank of the launch would run
// them again (16 times on 2 cores) and learn nothing more.
func skipUnlessOneRank(t testing.TB) {
	t.Helper()
	if testWorld.Size() != 1 {
		t.Skip("in-process tests run once, under plain go test")
	}
}

// reqOutcome is what a request's serve decided, in tokens.
type reqOutcome struct{ L1Hit, L2Hit, Computed int64 }

// runTally is what the model predicts of a whole run.
type runTally struct {
	Requests, L1Evictions, L2Evictions             int64
	BackupReserved, BackupCommitted, ReserveMisses int64
	LoadBacks, Uncached, Flushes                   int64
}

func tallyOf(c Counters) runTally {
	return runTally{c.Requests, c.L1Evictions, c.L2Evictions, c.BackupReserved, c.BackupCommitted, c.ReserveMisses,
		c.LoadBacks, c.Uncached, c.Flushes}
}

// rankResult is one in-process rank's run.
type rankResult struct {
	outcomes []reqOutcome
	counters Counters
	err      error
}

// steps cuts events into the steps the real run takes (workload.TakeBatch): a flush is a step of its own.
func steps(events []workload.Event, batch int) [][]workload.Event {
	var out [][]workload.Event
	for rest := events; ; {
		b := workload.TakeBatch(&rest, batch)
		if b == nil {
			return out
		}
		out = append(out, b)
	}
}

// runInProcess replays events on n ranks of one CP group in this process and returns every rank's result.
// cfg.Geometry.CPSize is set to n.
func runInProcess(cfg CacheConfig, n int, events []workload.Event, batch int) []rankResult {
	cfg.Geometry.CPSize = n
	// About three slabs, so that objects straddle slab ends as they do in a pool of several slabs.
	cfg.Geometry.SlabBytesMax = cfg.Geometry.SlotBytes() * int64(max(1, (cfg.Geometry.Slots+2)/3))
	g := cfg.Geometry
	slabs := make([][]byte, g.SlabCount())
	for i := range slabs {
		slabs[i] = make([]byte, g.SlabBytes(i))
	}
	group := newMemGroup(n)
	stepList := steps(events, batch)
	results := make([]rankResult, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[r] = runRank(cfg, group.comm(r), slabs, stepList)
			if results[r].err != nil {
				group.abort(fmt.Errorf("rank %d left the run: %w", r, results[r].err))
			}
		}()
	}
	wg.Wait()
	return results
}

// runRank is one rank's replay, in run.go's order (runStep, finish). Every step drains its backups
// (agree(StepConsensus, true, ...)), where the real run drains only when throttleWrites says so: copies are
// asynchronous, and without the drain a backup would commit at whichever consensus first found every rank
// done with it, so hits would depend on the copy worker's speed. Drained, every backup of a step commits at
// that step's consensus and the decisions are a function of the events alone, which the model can predict.
func runRank(cfg CacheConfig, comm *memComm, slabs [][]byte, stepList [][]workload.Event) (res rankResult) {
	eng, err := kernels.NewHostEngine(cfg.DeviceBytes(), slabs, 1)
	if err != nil {
		return rankResult{err: err}
	}
	defer eng.Close()
	cons := newConsensus(comm, 0, nil, nil, len(stepList))
	c, err := newController(cfg, comm.Rank(), eng, slabs, cons)
	if err != nil {
		return rankResult{err: err}
	}
	defer c.close()
	defer func() { res.counters = c.counters }()
	for i, batch := range stepList {
		if err := runOneStep(c, int64(i+1), batch, &res.outcomes); err != nil {
			res.err = fmt.Errorf("step %d: %w", i+1, err)
			return res
		}
	}
	if _, err := c.agree(FinalConsensus, true, true); err != nil {
		res.err = fmt.Errorf("final consensus: %w", err)
		return res
	}
	res.err = c.comparePlacements(false)
	return res
}

// placementEvery compares objects one by one every few steps, as --placement-assert-every does.
const placementEvery = 4

func runOneStep(c *controller, step int64, batch []workload.Event, outcomes *[]reqOutcome) error {
	c.cons.step = step
	if batch[0].Flush {
		if err := c.flush(false); err != nil {
			return err
		}
	} else {
		serveBatch(c, batch, outcomes)
	}
	c.endStep()
	if err := c.checkStepInvariants(); err != nil {
		c.fail(FailureInvariant, err)
	}
	const drain = true // every step, see runRank; the real run passes rs.drainNext here
	if _, err := c.agree(StepConsensus, drain, true); err != nil {
		return err
	}
	_ = c.throttleWrites() // mirrored for its counter; with every step drained nothing is left to throttle
	if step%placementEvery == 0 {
		return c.comparePlacements(false)
	}
	return nil
}

// serveBatch is runState.serve, recording each request's decisions from the counters it moved.
func serveBatch(c *controller, batch []workload.Event, outcomes *[]reqOutcome) {
	for i := range batch {
		before := c.counters
		req := batch[i].Request
		req.InputIDs = slices.Clone(req.InputIDs) // each rank decodes its own copy of the step in the real run
		if err := c.serve(&req); err != nil {
			c.fail(FailureDevice, err)
		}
		*outcomes = append(*outcomes, reqOutcome{
			L1Hit: c.counters.L1HitTokens - before.L1HitTokens, L2Hit: c.counters.L2HitTokens - before.L2HitTokens,
			Computed: c.counters.MissTokens - before.MissTokens,
		})
		if c.failure != nil {
			return
		}
	}
}

func TestInProcessCommReducesAndGathers(t *testing.T) {
	skipUnlessOneRank(t)
	const n, rounds = 5, 200
	g := newMemGroup(n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = memCommRounds(g.comm(r), rounds)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// memCommRounds checks MIN, MAX and the gather over many calls in a row: the barrier is reused at once.
func memCommRounds(c *memComm, rounds int) error {
	n := uint64(c.Size())
	for k := range uint64(rounds) {
		v := []uint64{k*n + uint64(c.Rank()), ^(k*n + uint64(c.Rank()))}
		got := make([]uint64, 2)
		if err := c.AllreduceUint64(v, got, mpi.Min); err != nil {
			return err
		}
		if got[0] != k*n || got[1] != ^(k*n+n-1) {
			return fmt.Errorf("rank %d round %d: MIN %v", c.Rank(), k, got)
		}
		all := make([]uint64, n)
		if err := c.AllgatherUint64([]uint64{k + uint64(c.Rank())}, all); err != nil {
			return err
		}
		for r, x := range all {
			if x != k+uint64(r) {
				return fmt.Errorf("rank %d round %d: gathered %v", c.Rank(), k, all)
			}
		}
	}
	return nil
}

func TestInProcessCommFailsLoudlyOnMismatch(t *testing.T) {
	skipUnlessOneRank(t)
	const n = 3
	cases := map[string]func(c *memComm) error{
		"lengths": func(c *memComm) error {
			v := make([]uint64, 2+c.Rank()%2)
			return c.AllreduceUint64(v, v, mpi.Min)
		},
		"calls": func(c *memComm) error {
			if c.Rank() == 1 {
				return c.AllgatherUint64([]uint64{1}, make([]uint64, n))
			}
			v := []uint64{1}
			return c.AllreduceUint64(v, v, mpi.Min)
		},
	}
	for name, call := range cases {
		g := newMemGroup(n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[r] = call(g.comm(r))
			}()
		}
		wg.Wait()
		for r, err := range errs {
			if err == nil {
				t.Errorf("%s: rank %d got no error from a mismatched collective", name, r)
			}
		}
	}
}

func TestInProcessCommAbortWakesWaiters(t *testing.T) {
	skipUnlessOneRank(t)
	g := newMemGroup(2)
	done := make(chan error)
	go func() {
		v := []uint64{1}
		done <- g.comm(0).AllreduceUint64(v, v, mpi.Min)
	}()
	g.abort(errors.New("rank 1 left"))
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a collective whose peer left returned no error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("abort did not wake the waiting rank")
	}
}
