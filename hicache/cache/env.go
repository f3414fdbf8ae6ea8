package cache

import (
	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/hicache/workload"
)

// Env is everything the core asks of the world around one rank: the step's events, the group's
// collectives, the start of asynchronous work and the wait for its completions, and the few
// operations on this rank's memory and files that finish at once. The core calls it only from
// inside Run, in program order, and is told of finished work only through Complete, called by the
// Env from inside Wait, Poll or Start. The real runner (package hicache) implements it with MPI,
// the shared slab, the copy worker, the L3 goroutines and the watchdog; the simulator (package sim)
// with a seeded scheduler over simulated memory and files.
type Env interface {
	// NextStep returns the events of step (1, 2, ...): up to --batch-requests requests or one
	// flush. nil ends the stream. On the real runner it is CP rank 0's broadcast.
	NextStep(step int64) ([]workload.Event, error)
	// Collective enters one collective of the CP group and leaves the group's result in c.Words.
	Collective(c *Collective) error
	// Start begins one piece of asynchronous work; its completion comes back through Core.Complete.
	Start(w Work)
	// Wait returns once done() holds, delivering completions as they come; r names the wait (the
	// watchdog's drain slot names it if it never ends).
	Wait(r WaitReason, done func() bool) error
	// Poll delivers the completions already in, without waiting.
	Poll()
	// BeginStep is told that a step begins, before any of its requests is served; ServedStep that
	// they all were (their load-backs started, their KV computed), before the step's consensus;
	// StepDone that the step ended (after its consensus and any flush or comparison it held). A
	// serving clock paces the step between them; nothing the core decides depends on what they do.
	BeginStep(step int64)
	Served(s *ServedStep)
	StepDone(step int64)
	// Prefetch is told that an L3 prefetch began (resolved false) and that the group agreed its
	// outcome (true).
	Prefetch(seq uint64, resolved bool)

	// At once, on this rank: write computed KV into device pages; verify a finished load-back
	// (pages checked and how many had a wrong byte); audit a committed object, every part of it in
	// this node's slab; and, on the group's keeper, learn a block the group wrote.
	Fill(f *Fill) error
	VerifyLoad(v *Verify) (pagesChecked, mismatches int64, err error)
	Audit(a *Audit) (ok bool)
	Adopt(key uint64)
}

// WaitReason names a local wait: what it waits for, and what usually causes it to never end.
type WaitReason struct{ Name, Hint string }

var (
	waitLoads    = WaitReason{"load wait", "a load-back copy on this rank did not complete"}
	waitWrites   = WaitReason{"write drain", "a backup copy on this rank did not complete"}
	waitL3       = WaitReason{"L3 drain", "an L3 read or write on this rank did not finish"}
	waitPrefetch = WaitReason{"L3 prefetch wait", "an L3 read on this rank did not finish"}
	waitL3Exists = WaitReason{
		"L3 existence checks",
		"an L3 existence check on this rank did not answer",
	}
	waitFlushL3IO = WaitReason{
		"flush L3 drain",
		"an L3 write or read on this rank did not finish before the flush's reset",
	}
)

// Op is what a collective does with its words.
type Op int

const (
	OpMin    Op = iota // all-reduce MIN in place
	OpGather           // all-gather: Words holds one word per CP rank, this rank's at its index
)

// Collective is one collective call of the CP group. Kind is the consensus kind it belongs to; Part
// is 0 for the call that opens it and 1 for a second reduction of the same call (the object
// comparison's vector), so that statistics count calls, not reductions. Transport says the words
// may travel over the step consensus's transport (NCCL in the GPU build); the others go over MPI.
type Collective struct {
	Kind      ConsensusKind
	Op        Op
	Part      int
	Transport bool
	Step      int64
	Words     []uint64
}

// Work is asynchronous work for the Env to start: *Copy, *BlockWrite, *BlockRead or
// *ExistenceCheck.
type Work interface{ work() }

// SlabSlot is a slot of the shared L2: a slab and a slot in it.
type SlabSlot = l3block.PageSlot

// Copy is one backup (device to slab, Gather) or load-back (slab to device) of a node's pages: page
// i of DevicePages and Slots go together. Its sequence number is replicated.
type Copy struct {
	Seq         uint64
	Gather      bool
	Object      uint64 // the L2 object (for messages and the simulator's slot checks)
	DevicePages []int32
	Slots       []SlabSlot
}

// BlockWrite is an L3 block to store, started on its writer rank only: every rank's parts of Pages,
// gathered from the slab, checked against the content of Tokens (the block's, from StartPos) before
// they are published.
type BlockWrite struct {
	Seq      uint64
	Key      uint64
	Pages    []SlabSlot
	Tokens   []int32
	StartPos int
}

// BlockRead is one block of an L3 prefetch, started on its reader rank only: read, verified by its
// checksum, and scattered into Pages. Tokens is how many tokens the prefetch reads (its deadline
// grows with them).
type BlockRead struct {
	Prefetch uint64 // the prefetch's sequence number
	Block    int    // within the prefetch
	Key      uint64
	Pages    []SlabSlot
	Tokens   int
	// the existence check whose agreed answer gave the prefetch its count (the simulator's model)
	Check uint64
}

// ExistenceCheck asks how many of Keys, from the first, the L3 holds now (on this rank's view of
// it): the answer stops at the first block that is not there, or is not a regular file. Keys are
// this rank's own among the request's blocks [FirstBlock, FirstBlock+Blocks), the span a count from
// it may reach (the simulator's model).
type ExistenceCheck struct {
	Seq        uint64
	Keys       []uint64
	FirstBlock int
	Blocks     int
}

func (*Copy) work()           {}
func (*BlockWrite) work()     {}
func (*BlockRead) work()      {}
func (*ExistenceCheck) work() {}

// Fill is the KV the model computed for Tokens (from StartPos), to write into DevicePages. Slots
// are its node's pages in the L2 object it points into, if any: bytes its next load-back serves as
// the L2's from now on, even when a prefetch read them from the L3 (the simulator's account of
// where each hit came from).
type Fill struct {
	DevicePages []int32
	Tokens      []int32
	StartPos    int
	Slots       []SlabSlot
}

// Verify is a finished load-back to check against the content of its tokens.
type Verify struct {
	Seq         uint64
	DevicePages []int32
	Tokens      []int32
	StartPos    int
}

// Audit is a committed object to check whole on this rank's node: the node-local parts [0, Parts)
// of its Slots in the node's slab (every part the node holds; on a group of one node, CP ranks [0,
// Parts)).
type Audit struct {
	Seq      uint64
	Object   uint64
	Slots    []SlabSlot
	Tokens   []int32
	StartPos int
	Parts    int
}

// CompletionKind says what finished.
type CompletionKind int

const (
	CopyDone CompletionKind = iota // a Copy, by Seq
	// a BlockWrite, by Seq (a failed write is still written: dropped, counted by the Env)
	BlockWritten
	BlockReadDone // block Block of prefetch Seq; Err set when the read failed
	BlocksFound   // existence check Seq: Found of its keys are there
)

// Completion is one finished piece of work.
type Completion struct {
	Kind  CompletionKind
	Seq   uint64
	Block int
	Found int
	Err   error
}
