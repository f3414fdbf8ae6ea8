package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// The benchmarks that run for minutes outside a job (bench l3, e2e, replay) own files and child
// processes: a block directory of gigabytes, an mpirun with its ranks. Go's default for SIGTERM and
// SIGINT ends the process at once, which left both behind; interruptible turns the signal into a
// cancelled context, so that the benchmark ends its launch in flight (mpirun forwards SIGTERM to
// its ranks) and removes its files, and the command then exits as a signal's end should, 128 + N.

// interruptedError is a command that a signal ended after it cleaned up.
type interruptedError struct {
	sig  syscall.Signal
	what string // what the command's cancellation path cleans up, for the message
	err  error  // what the cancelled work returned
}

// Error says what ended the command and what it cleaned up; or, when the cancelled work failed at
// something besides its cancellation (a directory it could not remove, a launch that had failed),
// that failure: a benchmark must not claim its files gone when they are not.
func (e *interruptedError) Error() string {
	if problems := besidesCancellation(e.err); len(problems) > 0 {
		return fmt.Sprintf(
			"received %s; the benchmark stopped, but: %v",
			spmd.SignalName(e.sig),
			errors.Join(problems...),
		)
	}
	return fmt.Sprintf("received %s; %s", spmd.SignalName(e.sig), e.what)
}

func (e *interruptedError) Unwrap() error { return e.err }

// exitStatus of an interrupted command: 128 + the signal, as for a run (EXIT STATUS).
func (e *interruptedError) exitStatus() int { return spmd.ExitSignalBase + int(e.sig) }

// besidesCancellation lists the errors in err's tree (errors.Join's too) that are not the
// cancellation itself.
func besidesCancellation(err error) []error {
	switch e := err.(type) {
	case nil:
		return nil
	case interface{ Unwrap() []error }:
		var out []error
		for _, x := range e.Unwrap() {
			out = append(out, besidesCancellation(x)...)
		}
		return out
	}
	if !errors.Is(err, context.Canceled) {
		return []error{err}
	}
	return besidesCancellation(
		errors.Unwrap(err),
	) // a wrapper of the cancellation, or of a join that holds it
}

// interruptible runs fn with a context that SIGTERM or SIGINT cancels. If a signal came before fn
// returned, or while it returned, the result is an *interruptedError whatever fn returned (cleaned
// says what fn's cancellation path removes or ends). After the first signal the default action is
// back, so that a second Ctrl-C ends a clean-up that hangs.
func interruptible(cleaned string, fn func(ctx context.Context) error) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	ctx, cancel := context.WithCancel(context.Background())
	var sig syscall.Signal // written by the watcher before it ends; read after it ended
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-ch:
			signal.Stop(ch)
			sig = s.(syscall.Signal)
			cancel()
		case <-ctx.Done():
		}
	}()
	err := fn(ctx)
	cancel()
	<-watched
	signal.Stop(ch)
	if sig == 0 {
		select { // a signal that came as fn returned, after the watcher had stopped looking
		case s := <-ch:
			sig = s.(syscall.Signal)
		default:
		}
	}
	if sig != 0 {
		return &interruptedError{sig: sig, what: cleaned, err: err}
	}
	return err
}

// asInterrupted finds an interruptedError in err.
func asInterrupted(err error) (*interruptedError, bool) {
	var ie *interruptedError
	ok := errors.As(err, &ie)
	return ie, ok
}
