package mpi

/*
#include "cph_mpi.h"

// The hot collectives neither keep the Go pointers they get nor call back into Go: telling cgo so
// spares each call the escape of its buffers and the callback bookkeeping.
#cgo noescape cph_allreduce
#cgo nocallback cph_allreduce
#cgo noescape cph_allgather
#cgo nocallback cph_allgather
#cgo noescape cph_bcast
#cgo nocallback cph_bcast
#cgo nocallback cph_gatherv
#cgo nocallback cph_barrier
*/
import "C"

import (
	"fmt"
	"math"
	"unsafe"
)

// Comm is an MPI communicator. Its rank and size are read once, when it is made, because both are
// fixed for the communicator's life and the hot paths ask for them often.
type Comm struct {
	handle C.MPI_Fint
	rank   int
	size   int
	name   string
	world  bool
}

// World returns MPI_COMM_WORLD. Init must have succeeded.
func World() (*Comm, error) {
	return newComm(C.cph_world(), "world", true)
}

func newComm(h C.MPI_Fint, name string, world bool) (*Comm, error) {
	c := &Comm{handle: h, name: name, world: world}
	var r, s C.int
	if err := check("MPI_Comm_rank", C.cph_rank(h, &r)); err != nil {
		return nil, err
	}
	if err := check("MPI_Comm_size", C.cph_size(h, &s)); err != nil {
		return nil, err
	}
	c.rank, c.size = int(r), int(s)
	return c, nil
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.size }

// Name is the label given when the communicator was made ("world", "cp", "node", ...), for
// messages.
func (c *Comm) Name() string { return c.name }

// Split partitions the communicator: ranks passing the same color form one new communicator,
// ordered by key (ties by rank in c). The name labels the new communicator in error messages.
func (c *Comm) Split(color, key int, name string) (*Comm, error) {
	var out C.MPI_Fint
	if err := check("MPI_Comm_split", C.cph_split(c.handle, C.int(color), C.int(key), &out)); err != nil {
		return nil, err
	}
	return newComm(out, name, false)
}

// SplitShared groups the ranks that can share memory, that is, the ranks of one node
// (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED), ordered by key.
func (c *Comm) SplitShared(key int, name string) (*Comm, error) {
	var out C.MPI_Fint
	if err := check("MPI_Comm_split_type", C.cph_split_shared(c.handle, C.int(key), &out)); err != nil {
		return nil, err
	}
	return newComm(out, name, false)
}

// Free releases a communicator made by Split or SplitShared. Freeing World is a no-op.
func (c *Comm) Free() error {
	if c == nil || c.world {
		return nil
	}
	return check("MPI_Comm_free", C.cph_free(c.handle))
}

// Barrier blocks until every rank of the communicator has entered it.
func (c *Comm) Barrier() error {
	return collectiveDone("MPI_Barrier", C.cph_barrier(c.handle))
}

const (
	typeInt64  = 0
	typeUint64 = 1
	typeBytes  = -1
)

func countOf(call string, n int) (C.int, error) {
	if n > math.MaxInt32 {
		return 0, fmt.Errorf("mpi: %s: %d elements exceed MPI's int count", call, n)
	}
	return C.int(n), nil
}

// AllreduceInt64 reduces send element-wise over all ranks into recv. send and recv may be the same
// slice (the reduction is then done in place); otherwise they must have equal lengths.
func (c *Comm) AllreduceInt64(send, recv []int64, op Op) error {
	if len(send) != len(recv) {
		return fmt.Errorf("mpi: MPI_Allreduce: send has %d elements, recv %d", len(send), len(recv))
	}
	if len(send) == 0 {
		return nil
	}
	return c.allreduce(
		uintptr(unsafe.Pointer(&send[0])),
		uintptr(unsafe.Pointer(&recv[0])),
		len(send),
		typeInt64,
		op,
	)
}

// AllreduceUint64 is AllreduceInt64 for unsigned values (digests, sequence numbers).
func (c *Comm) AllreduceUint64(send, recv []uint64, op Op) error {
	if len(send) != len(recv) {
		return fmt.Errorf("mpi: MPI_Allreduce: send has %d elements, recv %d", len(send), len(recv))
	}
	if len(send) == 0 {
		return nil
	}
	return c.allreduce(
		uintptr(unsafe.Pointer(&send[0])),
		uintptr(unsafe.Pointer(&recv[0])),
		len(send),
		typeUint64,
		op,
	)
}

// allreduce takes the buffers as addresses, so that cgo's run-time pointer check does not inspect
// them on every call (about a fifth of a one-element all-reduce's cost from Go). go:uintptrescapes
// makes the compiler put the objects whose addresses are converted in the call onto the heap, where
// nothing moves them (a stack copy would), and keep them alive until the call returns.
//
//go:uintptrescapes
//go:noinline
func (c *Comm) allreduce(send, recv uintptr, n int, dataType int, op Op) error {
	count, err := countOf("MPI_Allreduce", n)
	if err != nil {
		return err
	}
	if op != Min && op != Max && op != Sum {
		return fmt.Errorf("mpi: MPI_Allreduce: unsupported operator %v", op)
	}
	return collectiveDone(
		"MPI_Allreduce",
		C.cph_allreduce(
			c.handle,
			C.uintptr_t(send),
			C.uintptr_t(recv),
			count,
			C.int(dataType),
			C.int(op),
		),
	)
}

// AllgatherInt64 gathers len(send) values from every rank into recv, rank by rank; recv must hold
// Size()*len(send) values.
func (c *Comm) AllgatherInt64(send, recv []int64) error {
	if err := c.gatherLengths(len(send), len(recv)); err != nil || len(send) == 0 {
		return err
	}
	return c.allgather(unsafe.Pointer(&send[0]), unsafe.Pointer(&recv[0]), len(send), typeInt64)
}

// AllgatherUint64 is AllgatherInt64 for unsigned values.
func (c *Comm) AllgatherUint64(send, recv []uint64) error {
	if err := c.gatherLengths(len(send), len(recv)); err != nil || len(send) == 0 {
		return err
	}
	return c.allgather(unsafe.Pointer(&send[0]), unsafe.Pointer(&recv[0]), len(send), typeUint64)
}

// AllgatherBytes gathers len(send) bytes from every rank into recv, rank by rank; recv must hold
// Size()*len(send) bytes.
func (c *Comm) AllgatherBytes(send, recv []byte) error {
	if err := c.gatherLengths(len(send), len(recv)); err != nil || len(send) == 0 {
		return err
	}
	return c.allgather(unsafe.Pointer(&send[0]), unsafe.Pointer(&recv[0]), len(send), typeBytes)
}

func (c *Comm) gatherLengths(send, recv int) error {
	if recv != send*c.size {
		return fmt.Errorf(
			"mpi: MPI_Allgather: recv holds %d elements, want %d x %d ranks",
			recv,
			send,
			c.size,
		)
	}
	return nil
}

func (c *Comm) allgather(send, recv unsafe.Pointer, n int, dataType int) error {
	count, err := countOf("MPI_Allgather", n)
	if err != nil {
		return err
	}
	return collectiveDone(
		"MPI_Allgather",
		C.cph_allgather(c.handle, send, recv, count, C.int(dataType)),
	)
}

// BcastBytes broadcasts buf from root to every rank; every rank must pass a buffer of the same
// length.
func (c *Comm) BcastBytes(buf []byte, root int) error {
	if root < 0 || root >= c.size {
		return fmt.Errorf(
			"mpi: MPI_Bcast: root %d outside a communicator of %d ranks",
			root,
			c.size,
		)
	}
	if len(buf) == 0 {
		return nil
	}
	count, err := countOf("MPI_Bcast", len(buf))
	if err != nil {
		return err
	}
	return collectiveDone(
		"MPI_Bcast",
		C.cph_bcast(c.handle, unsafe.Pointer(&buf[0]), count, C.int(root)),
	)
}

// GathervBytes gathers every rank's send, whatever its length, to root, which gets them in rank
// order; the other ranks get nil. The lengths travel first, in an all-gather, so that every rank
// sees the same total and a total past MPI's int count fails alike on every rank.
func (c *Comm) GathervBytes(send []byte, root int) ([][]byte, error) {
	if root < 0 || root >= c.size {
		return nil, fmt.Errorf(
			"mpi: MPI_Gatherv: root %d outside a communicator of %d ranks",
			root,
			c.size,
		)
	}
	lengths := make([]int64, c.size)
	if err := c.AllgatherInt64([]int64{int64(len(send))}, lengths); err != nil {
		return nil, err
	}
	var total int64
	for _, n := range lengths {
		total += n
	}
	if total > math.MaxInt32 {
		return nil, fmt.Errorf(
			"mpi: MPI_Gatherv: %d bytes in all, more than MPI's int count",
			total,
		)
	}
	var recv []byte
	var counts, displs []C.int
	if c.rank == root {
		recv = make([]byte, total)
		counts, displs = make([]C.int, c.size), make([]C.int, c.size)
		var at int64
		for r, n := range lengths {
			counts[r], displs[r] = C.int(n), C.int(at)
			at += n
		}
	}
	rc := C.cph_gatherv(
		c.handle,
		unsafe.Pointer(unsafe.SliceData(send)),
		C.int(len(send)),
		unsafe.Pointer(unsafe.SliceData(recv)),
		unsafe.SliceData(counts),
		unsafe.SliceData(displs),
		C.int(root),
	)
	if err := collectiveDone("MPI_Gatherv", rc); err != nil || c.rank != root {
		return nil, err
	}
	parts := make([][]byte, c.size)
	for r := range parts {
		parts[r] = recv[displs[r] : displs[r]+counts[r] : displs[r]+counts[r]]
	}
	return parts, nil
}

// Abort ends every process of the communicator's job with the given exit code. It returns only if
// MPI_Abort itself fails.
func (c *Comm) Abort(code int) error {
	return check("MPI_Abort", C.cph_abort(c.handle, C.int(code)))
}
