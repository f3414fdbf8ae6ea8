package runner

import (
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
)

// Completions land on the step goroutine: what the copy worker and the L3 I/O finished is delivered
// to the core here (Poll and Wait call deliver), a read that missed its deadline is given up, and
// each write is counted.

// deliver hands every finished piece of work to the core, and gives up the L3 reads past their
// deadline as failed; with wait, it first waits a poll interval for something to finish.
func (rs *runState) deliver(wait bool) {
	if wait {
		select {
		case <-rs.done.notify:
		case <-time.After(drainPollInterval):
		}
	}
	rs.doneBuf = rs.done.take(rs.doneBuf)
	for _, d := range rs.doneBuf {
		if d.read != nil && !rs.landRead(&d) {
			continue
		}
		if d.Kind == cache.BlockWritten {
			rs.countWrite(d)
		}
		rs.core.Complete(d.Completion)
	}
	if rs.l3 != nil {
		rs.expireReads(time.Now())
	}
}

// landRead counts a finished read, which its goroutine landed in the slab; false for a read given
// up at its deadline, which the core has already been told of.
func (rs *runState) landRead(d *doneWork) bool {
	t := rs.l3
	r := d.read
	p := t.reads[r.key]
	if p == nil {
		panic(
			rs.broken(
				"a read of L3 prefetch %d block %d landed that was never issued, or landed twice",
				r.key.prefetch,
				r.key.block,
			),
		)
	}
	delete(t.reads, r.key)
	if p.state.Load() == readAbandoned {
		return false
	}
	if r.err != nil {
		rs.io.L3ReadFailures++
		if !t.readFailedSaid && !rs.pass.L3ReadFailuresExpected {
			t.readFailedSaid = true
			t.log.Warn(
				"L3 block read failed: the group computes that block and the rest of its prefetch (counted in l3.read_failures; later failures are not said)",
				"err",
				r.err,
			)
		}
		return true
	}
	rs.io.L3Reads++
	rs.io.L3ReadBytes += r.bytes
	rs.readLatency.Observe(r.landed.Sub(p.issued))
	return true
}

// expireReads gives up every read past its deadline: a failed read for the core (the group agrees
// it as a miss), the file named once; its result, when it comes, is dropped.
func (rs *runState) expireReads(now time.Time) {
	t := rs.l3
	for key, p := range t.reads {
		if p.deadline.IsZero() || now.Before(p.deadline) ||
			!p.state.CompareAndSwap(readInFlight, readAbandoned) {
			continue // not due, or landing now: its completion is on its way
		}
		rs.io.L3ReadFailures++
		rs.io.L3ReadTimeouts++
		if !t.timeoutSaid {
			t.timeoutSaid = true
			t.log.Warn(
				"L3 block read given up at its deadline: a miss for the group (counted in l3.read_timeouts; later ones are not said)",
				"file",
				t.store.BlockPath(p.read.Key),
				"deadline",
				p.deadline.Format(time.RFC3339Nano),
			)
		}
		rs.core.Complete(
			cache.Completion{
				Kind:  cache.BlockReadDone,
				Seq:   key.prefetch,
				Block: key.block,
				Err:   errReadDeadline,
			},
		)
	}
}

// countWrite tallies a finished block write of this rank.
func (rs *runState) countWrite(x doneWork) {
	switch {
	case x.skipped:
		rs.io.L3WritesSkipped++
	case x.Err == nil:
		if x.writtenBytes > 0 {
			rs.io.L3Writes++
			rs.io.L3WriteBytes += x.writtenBytes
		}
	case isMismatch(x.Err):
		rs.job.Log.Error(
			"L3 block write refused: its L2 parts were not the block's content (counted in l3.write_mismatches; the run fails)",
			"err",
			x.Err,
		)
		return
	default:
		rs.io.L3WriteErrors++
		if !rs.l3.writeFailSaid {
			rs.l3.writeFailSaid = true
			rs.l3.log.Warn(
				"L3 block write failed: the block is dropped and the run goes on (counted in l3.write_errors; later failures are not said)",
				"err",
				x.Err,
			)
		}
	}
}
