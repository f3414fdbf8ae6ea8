package runner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/cphicache/cphicache/mpi"
)

// The simulated MPI of the runner's Env under simulation (envsim_test.go): one CP group's
// communicator in one process, its ranks goroutines. Each collective is a rendezvous of every rank
// of the group, as MPI's are; a seeded delay before each entry varies the order the ranks arrive
// in. Ending the job (as mpirun ends every rank once one exits) makes every collective in flight,
// and every later one, return errJobEnded.

// errJobEnded is what a collective returns once the simulated job has ended (a watchdog fired, or
// its bound).
var errJobEnded = errors.New("the simulated job ended (as mpirun ends every rank when one exits)")

// simGroup is the rendezvous of one CP group's ranks.
type simGroup struct {
	size  int
	mu    sync.Mutex
	cond  *sync.Cond
	cur   *simRound // the rendezvous the ranks are gathering at; nil between two
	ended bool
}

// simRound is one collective call of the group: what each rank brought, and whether every rank has.
type simRound struct {
	op      string
	words   [][]uint64
	bytes   [][]byte
	arrived int
	done    bool
	// a rank that entered another collective (a divergence the core must have caught first)
	unpaired string
}

func newSimGroup(size int) *simGroup {
	g := &simGroup{size: size}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// end ends the job for the group: every rank in or entering a collective gets errJobEnded.
func (g *simGroup) end() {
	g.mu.Lock()
	g.ended = true
	g.mu.Unlock()
	g.cond.Broadcast()
}

// meet enters rank's collective op with its words and bytes, and returns the round once every rank
// has.
func (g *simGroup) meet(rank int, op string, words []uint64, bytes []byte) (*simRound, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.ended {
		return nil, errJobEnded
	}
	r := g.cur
	if r == nil {
		r = &simRound{op: op, words: make([][]uint64, g.size), bytes: make([][]byte, g.size)}
		g.cur = r
	}
	if r.op != op && r.unpaired == "" {
		r.unpaired = fmt.Sprintf("rank %d entered %s while another rank was in %s", rank, op, r.op)
	}
	r.words[rank], r.bytes[rank] = append([]uint64(nil), words...), append([]byte(nil), bytes...)
	if r.arrived++; r.arrived == g.size {
		r.done, g.cur = true, nil
		g.cond.Broadcast()
	}
	for !r.done && !g.ended {
		g.cond.Wait()
	}
	if !r.done {
		return nil, errJobEnded
	}
	if r.unpaired != "" {
		return nil, fmt.Errorf("collectives that cannot pair: %s", r.unpaired)
	}
	return r, nil
}

// simComm is one rank's view of its group: what the runner's consensus (groupComm) and step
// broadcast (stepBroadcaster) need of *mpi.Comm.
type simComm struct {
	g    *simGroup
	rank int
	rng  *rand.Rand // this rank's: its delays before each entry
}

func (c *simComm) Size() int { return c.g.size }
func (c *simComm) Rank() int { return c.rank }

// jitter delays a rank before a collective now and then, so that the ranks arrive in seeded, varied
// orders. The sleep is on the job's simulated clock (envsim_bubble_test.go): it ends only once
// every other goroutine of the job has blocked, so a rank that sleeps arrives after those that do
// not, whatever the machine's load; a yield only lets the scheduler choose. Neither spins: the
// clock moves past a sleep, and a yield never blocks.
func (c *simComm) jitter() {
	switch c.rng.IntN(8) {
	case 0:
		time.Sleep(time.Duration(c.rng.IntN(300)) * time.Microsecond)
	case 1, 2:
		runtime.Gosched()
	}
}

func (c *simComm) AllreduceUint64(send, recv []uint64, op mpi.Op) error {
	if op != mpi.Min || len(send) != len(recv) {
		return fmt.Errorf(
			"simulated MPI: only an in-place-sized MIN all-reduce is carried (op %v, %d and %d words)",
			op,
			len(send),
			len(recv),
		)
	}
	c.jitter()
	r, err := c.g.meet(c.rank, fmt.Sprintf("MIN all-reduce of %d words", len(send)), send, nil)
	if err != nil {
		return err
	}
	for i := range recv {
		recv[i] = r.words[0][i]
		for _, w := range r.words[1:] {
			recv[i] = min(recv[i], w[i])
		}
	}
	return nil
}

func (c *simComm) AllgatherUint64(send, recv []uint64) error {
	if len(recv) != len(send)*c.g.size {
		return fmt.Errorf("simulated MPI: all-gather of %d words into %d", len(send), len(recv))
	}
	c.jitter()
	r, err := c.g.meet(c.rank, fmt.Sprintf("all-gather of %d words", len(send)), send, nil)
	if err != nil {
		return err
	}
	for rank, w := range r.words {
		copy(recv[rank*len(send):], w)
	}
	return nil
}

// BcastBytes is a rendezvous too: the root waits for its group, where MPI's eager broadcast may let
// it run ahead (the simulator in hicache/sim models that; here the runner's own waits are what is
// under test).
func (c *simComm) BcastBytes(buf []byte, root int) error {
	c.jitter()
	r, err := c.g.meet(
		c.rank,
		fmt.Sprintf("broadcast of %d bytes from %d", len(buf), root),
		nil,
		buf,
	)
	if err != nil {
		return err
	}
	copy(buf, r.bytes[root])
	return nil
}

// newJitter is a rank's PRNG for its delays, drawn from the job's seed.
func newJitter(seed uint64, worldRank int) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(worldRank)+1))
}
