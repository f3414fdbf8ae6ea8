package nccl

/*
#include "cph_nccl.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"time"
)

// Op is an NCCL reduction operator (ncclRedOp_t).
type Op int

// The reductions cphicache uses, with nccl.h's values. MIN is writing_check's consensus operator.
const (
	Sum Op = 0
	Max Op = 2
	Min Op = 3
)

func (o Op) String() string {
	switch o {
	case Sum:
		return "SUM"
	case Max:
		return "MAX"
	case Min:
		return "MIN"
	}
	return fmt.Sprintf("Op(%d)", int(o))
}

// The NCCL data types (ncclDataType_t) this package reduces.
const (
	typeInt64  = 4
	typeUint64 = 5
)

// ErrDestroyed is returned by a call on a Comm after Destroy or Abort.
var ErrDestroyed = errors.New("nccl: communicator already destroyed")

// Comm is one rank's NCCL communicator.
type Comm struct {
	lib    *Library
	handle C.ncclComm_t
	nranks int
	rank   int
	// made by InitRankWithin: any call may return ncclInProgress, and must then be waited for
	nonBlocking bool
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of ranks in the communicator.
func (c *Comm) Size() int { return c.nranks }

// AllreduceInt64 reduces count int64 values at device address sendPtr over all ranks into recvPtr
// (the same address reduces in place), enqueued on the CUDA stream given as its handle (0 is the
// default stream). It returns once NCCL has enqueued the work: the caller synchronises the stream
// before reading recvPtr.
func (c *Comm) AllreduceInt64(sendPtr, recvPtr uintptr, count int, op Op, stream uintptr) error {
	return c.allreduce(sendPtr, recvPtr, count, typeInt64, op, stream)
}

// AllreduceUint64 is AllreduceInt64 for unsigned values, which MIN and MAX order as unsigned.
func (c *Comm) AllreduceUint64(sendPtr, recvPtr uintptr, count int, op Op, stream uintptr) error {
	return c.allreduce(sendPtr, recvPtr, count, typeUint64, op, stream)
}

// AllreducePreMulSumUint64 all-reduces count uint64 values at sendPtr into recvPtr with NCCL's
// pre-multiplied sum (ncclRedOpCreatePreMulSum, NCCL 2.11 and later; HasPreMulSum): each rank's
// values are multiplied by scalar, then summed, wrapping modulo 2^64. cphicache's consensus never
// uses it. It is the GPU check's proof that NCCL computes on the device: on one rank MIN, MAX and
// SUM leave the values as they are, so a call that did nothing at all would pass for them, but not
// for this.
func (c *Comm) AllreducePreMulSumUint64(
	sendPtr, recvPtr uintptr,
	count int,
	scalar uint64,
	stream uintptr,
) error {
	if c.handle == nil {
		return ErrDestroyed
	}
	if !c.lib.HasPreMulSum() {
		return fmt.Errorf(
			"nccl: %s (NCCL %s) has no ncclRedOpCreatePreMulSum (NCCL 2.11 and later)",
			c.lib.path,
			VersionString(c.lib.version),
		)
	}
	var op C.ncclRedOp_t
	if err := c.done(
		"ncclRedOpCreatePreMulSum",
		C.cph_nccl_redop_create_premulsum_u64(c.lib.c, &op, C.uint64_t(scalar), c.handle),
	); err != nil {
		return err
	}
	// NCCL allows destroying the operator once the last call using it has returned (enqueued).
	err := c.allreduceOp(sendPtr, recvPtr, count, typeUint64, op, stream)
	return errors.Join(
		err,
		c.done("ncclRedOpDestroy", C.cph_nccl_redop_destroy(c.lib.c, op, c.handle)),
	)
}

func (c *Comm) allreduce(
	sendPtr, recvPtr uintptr,
	count int,
	dataType int,
	op Op,
	stream uintptr,
) error {
	if c.handle == nil {
		return ErrDestroyed
	}
	if op != Min && op != Max && op != Sum {
		return fmt.Errorf("nccl: ncclAllReduce: unsupported operator %v", op)
	}
	return c.allreduceOp(sendPtr, recvPtr, count, dataType, C.ncclRedOp_t(op), stream)
}

func (c *Comm) allreduceOp(
	sendPtr, recvPtr uintptr,
	count int,
	dataType int,
	op C.ncclRedOp_t,
	stream uintptr,
) error {
	if count < 0 {
		return fmt.Errorf("nccl: ncclAllReduce: negative count %d", count)
	}
	rc := C.cph_nccl_all_reduce(
		c.lib.c,
		C.uintptr_t(sendPtr),
		C.uintptr_t(recvPtr),
		C.size_t(count),
		C.ncclDataType_t(dataType),
		op,
		c.handle,
		C.uintptr_t(stream),
	)
	return c.done("ncclAllReduce", rc)
}

// done checks a call's result; on a non-blocking communicator, ncclInProgress is waited out first
// (NCCL's rule: wait until a call is done before the next one). The caller's watchdog bounds this,
// as it bounds the stream synchronisation that follows.
func (c *Comm) done(call string, rc C.ncclResult_t) error {
	if c.nonBlocking && Result(rc) == InProgress {
		return c.wait(call, 0)
	}
	return c.lib.check(call, rc, c.handle)
}

// wait polls a non-blocking communicator's state (ncclCommGetAsyncError) until it leaves
// ncclInProgress, and returns its error if it failed. timeout > 0 bounds the wait: past it, the
// error wraps Timeout.
//
// The pause between polls starts short and doubles up to asyncPollInterval: a collective that NCCL
// reports in progress (connecting on first use) is usually done within microseconds, and
// writing_check waits on it.
func (c *Comm) wait(call string, timeout time.Duration) error {
	start, pause := time.Now(), asyncPollFirstPause
	for {
		var state C.ncclResult_t
		if err := c.lib.check("ncclCommGetAsyncError", C.cph_nccl_comm_get_async_error(c.lib.c, c.handle, &state), c.handle); err != nil {
			return fmt.Errorf("nccl: %s: %w", call, err)
		}
		if Result(state) != InProgress {
			return c.lib.check(call, state, c.handle)
		}
		if waited := time.Since(start); timeout > 0 && waited >= timeout {
			return &Error{
				Call: call,
				Code: Timeout,
				Message: fmt.Sprintf(
					"still in progress after %.1f s (the bound given); communicator aborted",
					waited.Seconds(),
				),
			}
		}
		time.Sleep(pause)
		pause = min(2*pause, asyncPollInterval)
	}
}

// Destroy frees the communicator once its pending work is done (ncclCommDestroy). Destroying twice
// is harmless.
func (c *Comm) Destroy() error {
	return c.release(false)
}

// Abort frees the communicator and cancels its pending work (ncclCommAbort): the way out after a
// failure, when a peer may never arrive. Aborting a destroyed communicator is harmless.
func (c *Comm) Abort() error {
	return c.release(true)
}

func (c *Comm) release(abort bool) error {
	if c == nil || c.handle == nil {
		return nil
	}
	handle := c.handle
	// The handle is forgotten even on failure: NCCL has released or poisoned it either way.
	c.handle = nil
	if abort {
		return c.lib.check("ncclCommAbort", C.cph_nccl_comm_abort(c.lib.c, handle), nil)
	}
	return c.lib.check("ncclCommDestroy", C.cph_nccl_comm_destroy(c.lib.c, handle), nil)
}
