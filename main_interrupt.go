package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// The benchmarks that run for minutes outside a job (bench l3, e2e, replay) own files and child processes: a
// block directory of gigabytes, an mpirun with its ranks. Go's default for SIGTERM and SIGINT ends the process
// at once, which left both behind; interruptible turns the signal into a cancelled context, so that the
// benchmark ends its launch in flight (mpirun forwards SIGTERM to its ranks) and removes its files, and the
// command then exits as a signal's end should, 128 + N.

// interruptedError is a command that a signal ended after it cleaned up.
type interruptedError struct {
	sig  syscall.Signal
	what string // what the command cleaned up, for the message
	err  error  // what the cancelled work returned
}

func (e *interruptedError) Error() string {
	return fmt.Sprintf("received %s; %s", signalName(e.sig), e.what)
}

func (e *interruptedError) Unwrap() error { return e.err }

// exitStatus of an interrupted command: 128 + the signal, as for a run (EXIT STATUS).
func (e *interruptedError) exitStatus() int { return spmd.ExitSignalBase + int(e.sig) }

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}

// interruptible runs fn with a context that SIGTERM or SIGINT cancels. If a signal came, the result is an
// *interruptedError whatever fn returned (cleaned says what fn's cancellation path removed or ended).
func interruptible(cleaned string, fn func(ctx context.Context) error) error {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(ch)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan syscall.Signal, 1)
	go func() {
		select {
		case sig := <-ch:
			got <- sig.(syscall.Signal)
			cancel()
		case <-ctx.Done():
		}
	}()
	err := fn(ctx)
	cancel()
	select {
	case sig := <-got:
		return &interruptedError{sig: sig, what: cleaned, err: err}
	default:
		return err
	}
}

// asInterrupted finds an interruptedError in err.
func asInterrupted(err error) (*interruptedError, bool) {
	var ie *interruptedError
	ok := errors.As(err, &ie)
	return ie, ok
}
