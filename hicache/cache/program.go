package cache

import (
	"errors"
	"fmt"

	"github.com/cphicache/cphicache/hicache/workload"
)

// The step program: what one rank does for the whole event stream, in the order every rank of its
// group does it. Nothing below returns early on local state before a collective, and a rank's own
// failure waits for the next consensus, where the whole group learns it. Each blocking point (the
// events, a local wait, a collective) is a call to the Env.

// Run replays the event stream to its end: every step, the last drain and assert. It returns the
// error that ended the group's run, the same on every rank of the group (or this rank's own, which
// its peers learn as a *PeerFailure in the same consensus).
func (c *Core) Run() error {
	batch, err := c.env.NextStep(1)
	for err == nil && batch != nil {
		// The stream is read a step ahead, so that the next step's L3 existence checks run while
		// this one is served (l3exists.go). Every rank reads it at the same point of its program,
		// as every collective.
		var next []workload.Event
		if next, err = c.env.NextStep(c.step + 2); err != nil {
			return err
		}
		c.next = next
		c.checkAhead(next)
		if err := c.runStep(batch); err != nil {
			return err
		}
		batch = next
	}
	c.next = nil
	if err != nil {
		return err
	}
	// Requests still waiting for a prefetch get steps of their own (every rank knows: the list is
	// replicated).
	for len(c.deferred) > 0 {
		if err := c.runStep(nil); err != nil {
			return err
		}
	}
	return c.finish()
}

// finish ends the replay: every backup issued is committed, the last consensus compares the final
// digests (and carries any failure still waiting), the L3 I/O is settled, and the objects are
// compared one by one. Validate first flushes once when the workload had none, so that its flush
// row has a flush to check.
func (c *Core) finish() error {
	if c.cfg.FlushAtEnd && c.counters.Flushes == 0 {
		if err := c.recordOr(c.flush(c.cfg.RecordDivergence)); err != nil {
			return err
		}
	}
	a, err := c.agree(FinalConsensus, true, true)
	if err == nil {
		err = c.settle(FinalConsensus, a, true)
	}
	if err := c.recordOr(err); err != nil {
		return err
	}
	return c.recordOr(c.comparePlacements(c.cfg.RecordDivergence))
}

// runStep is one step: the requests the last step kept waiting for their prefetch, then this step's
// requests or its flush, the step consensus, and what the configuration hangs on the step's end.
func (c *Core) runStep(batch []workload.Event) error {
	c.step++
	c.env.BeginStep(c.step)
	c.serveDeferred()
	if len(batch) > 0 && batch[0].Flush {
		if err := c.recordOr(c.flush(c.cfg.RecordDivergence)); err != nil {
			return err
		}
	} else if err := c.serveBatch(batch); err != nil {
		return err
	}
	c.endStep()
	c.env.Served(&ServedStep{Step: c.step, Requests: c.served, LoadsDone: c.loadsDone})
	c.served = c.served[:0]
	if c.cfg.Testing.CheckInvariants {
		if err := c.checkStepInvariants(); err != nil {
			c.fail(FailureInvariant, fmt.Errorf("step %d: %w", c.step, err))
		}
	}
	_, err := c.agree(StepConsensus, c.drainNext || c.cfg.SyncCopies, true)
	if err := c.recordOr(err); err != nil {
		return err
	}
	c.drainNext = c.throttleWrites()
	if c.cfg.PerturbAtStep == c.step {
		c.alloc.Perturb()
	}
	if c.cfg.Testing.PerturbStateAtStep == c.step {
		c.alloc.PerturbStateForTest()
	}
	if c.cfg.FlushEvery > 0 && c.step%c.cfg.FlushEvery == 0 {
		if err := c.recordOr(c.flush(c.cfg.RecordDivergence)); err != nil {
			return err
		}
	}
	if c.cfg.PlacementAssertEvery > 0 && c.step%c.cfg.PlacementAssertEvery == 0 {
		if err := c.recordOr(c.comparePlacements(c.cfg.RecordDivergence)); err != nil {
			return err
		}
	}
	c.env.StepDone(c.step)
	return nil
}

// serveBatch runs a step's requests. With an L3 it first agrees the step's prefetches (a collective
// every rank enters, whatever its state), and the requests that wait for one are served in the next
// step. A rank that fails stops serving and takes its failure to the step's consensus.
func (c *Core) serveBatch(batch []workload.Event) error {
	var waiting map[*workload.Request]bool // nil without an L3: no allocation on the step's path
	if c.l3 != nil && len(batch) > 0 {
		deferred, err := c.planPrefetch(batch)
		if err != nil {
			return err
		}
		c.deferred = deferred
		waiting = make(map[*workload.Request]bool, len(deferred))
		for _, d := range deferred {
			waiting[d.req] = true
		}
	}
	for i := range batch {
		if c.failure != nil {
			return nil
		}
		if waiting[&batch[i].Request] {
			continue
		}
		if err := c.serve(&batch[i].Request); err != nil {
			c.fail(FailureDevice, err)
		}
	}
	return nil
}

// serveDeferred serves the requests the last step kept waiting for their prefetch, each after its
// prefetched blocks joined the tree.
func (c *Core) serveDeferred() {
	deferred := c.deferred
	c.deferred = nil
	for _, d := range deferred {
		if c.failure != nil {
			return
		}
		c.attachPrefetch(d.req, d.prefetch)
		if err := c.serve(d.req); err != nil {
			c.fail(FailureDevice, err)
		}
	}
}

// recordOr returns err, except a divergence in validate, which it records before the group recovers
// (not one that put the ranks out of step: they are at different points of their programs, so no
// recovery can meet).
func (c *Core) recordOr(err error) error {
	var div *DivergenceError
	if !errors.As(err, &div) || !c.cfg.RecordDivergence || div.OutOfStep != nil {
		return err
	}
	if c.counters.DivergenceFirstStep == 0 {
		c.counters.DivergenceFirstStep = div.Step
	}
	return c.recover()
}
