package runner

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/cphicache/cphicache/kernels"
)

// Fault handling: injected faults for validation, signals, and the one shared-memory name that can
// still be linked when the process dies.

// Exit statuses that tell an operator what ended a rank.
const ExitInjected = 4 // --inject-exit

// injectHangOrExit carries out --inject-hang and --inject-exit at the end of a step, before its
// consensus: one rank stops (or leaves) while the others enter a collective, which is what the
// watchdog must catch.
func (rs *runState) injectHangOrExit(step int64) {
	rank := rs.job.Topo.WorldRank
	if rs.opts.InjectExit.Hits(rank, step) {
		fmt.Fprintf(
			os.Stderr,
			"cphicache: rank %d: injected exit at step %d (--inject-exit); ending this rank\n",
			rank,
			step,
		)
		os.Exit(ExitInjected)
	}
	if rs.opts.InjectHang.Hits(rank, step) {
		fmt.Fprintf(
			os.Stderr,
			"cphicache: rank %d: injected hang at step %d (--inject-hang): not entering the step consensus\n",
			rank,
			step,
		)
		for {
			time.Sleep(time.Hour)
		}
	}
}

// slowCopyDelay is how long each copy of the rank named by Testing.SlowCopyRank takes (tests only).
const slowCopyDelay = 3 * time.Millisecond

// faultyEngine is the copy engine as the controller sees it: the real one, with the faults that
// --inject-copy-error and --inject-stuck-copy ask for. Each fault is armed by the step loop and
// taken by the next copy the worker runs, on the worker's goroutine.
type faultyEngine struct {
	copyEngine
	failNext  atomic.Bool
	stickNext atomic.Bool
	failed    atomic.Bool  // an armed failure was taken: the injected copy error fired
	delay     atomic.Int64 // nanoseconds added to every copy (tests)
}

func newFaultyEngine(e copyEngine) *faultyEngine { return &faultyEngine{copyEngine: e} }

// errInjectedCopy is the failure --inject-copy-error makes.
var errInjectedCopy = errors.New("injected copy error (--inject-copy-error)")

func (f *faultyEngine) Gather(spans []kernels.Span) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.copyEngine.Gather(spans)
}

func (f *faultyEngine) Scatter(spans []kernels.Span) error {
	if err := f.fault(); err != nil {
		return err
	}
	return f.copyEngine.Scatter(spans)
}

// fault carries out an armed fault: fail this copy, or never finish it (the worker blocks for good,
// as a copy engine that hangs would; only the watchdog ends such a run).
func (f *faultyEngine) fault() error {
	if d := f.delay.Load(); d > 0 {
		time.Sleep(time.Duration(d))
	}
	if f.stickNext.Swap(false) {
		select {}
	}
	if f.failNext.Swap(false) {
		f.failed.Store(true)
		return errInjectedCopy
	}
	return nil
}

// injectCopyFaults arms --inject-copy-error and --inject-stuck-copy at the start of their step: the
// rank's next copy (a backup of this step, in the default workload) fails, or never completes.
func (rs *runState) injectCopyFaults(step int64) {
	rank := rs.job.Topo.WorldRank
	if rs.opts.InjectCopyError.Hits(rank, step) {
		rs.faults.failNext.Store(true)
	}
	if rs.opts.InjectStuckCopy.Hits(rank, step) {
		fmt.Fprintf(
			os.Stderr,
			"cphicache: rank %d: injected stuck copy at step %d (--inject-stuck-copy): its next copy never completes\n",
			rank,
			step,
		)
		rs.faults.stickNext.Store(true)
	}
}
