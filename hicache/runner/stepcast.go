package runner

import (
	"encoding/binary"

	"github.com/cphicache/cphicache/hicache/workload"
)

// nextStep is the replicated event stream: CP-rank 0 sends each step's events to its group. A step
// is up to --batch-requests requests, or one flush, or under the serving clock what has arrived up
// to its token budget. An empty step ends the stream. The events travel in one broadcast of
// stepInlineBytes, after their length and the step's earliest start on the serving clock, and only
// a step too big for it takes a second: on an oversubscribed node every broadcast is a wait for the
// whole group to be scheduled.
func (rs *runState) nextStep(step int64) ([]workload.Event, error) {
	var cp stepBroadcaster = rs.job.Topo.CP
	if rs.testStepComm != nil {
		cp = rs.testStepComm
	}
	first := rs.stepBuf[:]
	var payload []byte
	var sent []workload.Event
	if cp.Rank() == 0 {
		var startNs int64
		if rs.clock != nil {
			sent, startNs = rs.clock.form(&rs.events)
		} else {
			sent = workload.TakeBatch(&rs.events, rs.opts.BatchRequests)
		}
		if sent != nil { // an empty step, with closed-loop clients, is not the stream's end
			payload = workload.EncodeEvents(sent)
		}
		binary.LittleEndian.PutUint64(first, uint64(len(payload)))
		binary.LittleEndian.PutUint64(first[8:], uint64(startNs))
		copy(first[stepHeaderBytes:], payload)
	}
	// The broadcast of the event stream blocks like a collective, so the watchdog guards it too: a
	// hung CP-rank 0 must not leave its group waiting forever.
	rs.cons.watchdog.Arm("step broadcast", rs.cons.group, cp.Size(), step)
	defer rs.cons.watchdog.Disarm()
	if err := cp.BcastBytes(first, 0); err != nil {
		return nil, err
	}
	n := int(binary.LittleEndian.Uint64(first))
	if n == 0 {
		return nil, nil
	}
	if cp.Rank() != 0 {
		payload = make([]byte, n)
		copy(payload, first[stepHeaderBytes:])
	}
	if inline := len(first) - stepHeaderBytes; n > inline {
		if err := cp.BcastBytes(payload[inline:], 0); err != nil {
			return nil, err
		}
	}
	batch, err := workload.DecodeEvents(payload)
	workload.ExpandEvents(batch, rs.opts.VocabSize)
	if err == nil && rs.clock != nil {
		rs.clock.received(step, int64(binary.LittleEndian.Uint64(first[8:])), batch, sent)
	}
	return batch, err
}

// stepBroadcaster is what the step broadcast needs of the CP group's communicator (*mpi.Comm has
// it).
type stepBroadcaster interface {
	Rank() int
	Size() int
	BcastBytes(buf []byte, root int) error
}

// stepHeaderBytes leads the step broadcast: the events' length, then the step's earliest start in
// trace nanoseconds (0 without the serving clock).
const stepHeaderBytes = 16

// stepInlineBytes is the step broadcast's size: a step of 4 Mooncake requests (their block ids) or
// of a few short token requests fits it.
const stepInlineBytes = 4096
