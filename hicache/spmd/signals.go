package spmd

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
)

// ExitSignalBase plus the signal number is the exit status of a rank ended by a signal, as a shell
// reports it.
const ExitSignalBase = 128

// Cleanup holds what must run however the process ends, also when it ends abnormally (the watchdog,
// a signal) and deferred calls do not run: a shared-memory segment not yet unlinked, the kept copy
// of a trace read from standard input, validate's L3 directory, a periodic metrics file that would
// say a dead job runs. Its owner adds an action (or makes the thing and adds its undo as one step,
// Create) and removes it once done; Run runs whatever is left, once, and from then on the process
// is ending: an action added later runs at once, and Create makes nothing. Safe from any goroutine.
type Cleanup struct {
	mu      sync.Mutex
	actions map[int]func()
	next    int
	// made when Run begins (the process is on its way out), closed when it is done
	ended chan struct{}
}

// ErrEnding is Create's refusal once Run has begun.
var ErrEnding = errors.New(
	"the process is ending (a signal or the watchdog): nothing more is created",
)

// Add registers fn and returns the function that unregisters it. Once Run has begun, fn runs at
// once instead.
func (c *Cleanup) Add(fn func()) (remove func()) {
	c.mu.Lock()
	if c.ended != nil {
		c.mu.Unlock()
		fn()
		return func() {}
	}
	defer c.mu.Unlock()
	return c.addLocked(fn)
}

// Create makes something that must not outlive the process and registers its undo, as one step
// against Run: a Run that begins meanwhile waits for it, then undoes it; once Run has begun, create
// is not called (ErrEnding). Without it, a signal between a file's creation and the Add of its
// removal left the file behind, and so did one whose Run came just before the file was made, while
// the process had not yet exited. create should be quick (an open): what follows it, however long,
// is covered.
func (c *Cleanup) Create(create func() (undo func(), err error)) (remove func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended != nil {
		return nil, ErrEnding
	}
	undo, err := create()
	if err != nil {
		return nil, err
	}
	if undo == nil {
		undo = func() {}
	}
	return c.addLocked(undo), nil
}

func (c *Cleanup) addLocked(fn func()) (remove func()) {
	if c.actions == nil {
		c.actions = map[int]func(){}
	}
	id := c.next
	c.next++
	c.actions[id] = fn
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.actions, id)
	}
}

// Run runs and forgets every registered action; it is for the process's last moments. A second Run
// (a signal while the watchdog's runs) waits for the first to finish, so that neither exits with
// the clean-up half done.
func (c *Cleanup) Run() {
	if c == nil {
		return
	}
	c.mu.Lock()
	if c.ended != nil {
		ended := c.ended
		c.mu.Unlock()
		<-ended
		return
	}
	c.ended = make(chan struct{})
	defer close(c.ended)
	actions := c.actions
	c.actions = nil
	c.mu.Unlock()
	for _, fn := range actions {
		fn()
	}
}

// handleSignals ends the run on SIGTERM (scancel) or SIGINT (Ctrl-C): in-flight copies are
// abandoned, the clean-up runs (a still-linked segment is unlinked), the process exits with 128 +
// the signal. World rank 0 says why; mpirun delivers the signal to every rank (as SIGTERM), so the
// others exit quietly, unless they were waiting (doing: the watchdog's Doing, "" when not in a wait
// of a second or more): when another rank's watchdog ends the job, the launcher's SIGTERM finds the
// ranks it waited for, and each says where it was, or the watchdog's line would be the only one. A
// SIGINT reaches a rank other than 0 only when someone sent it to that rank (kill -INT, a
// debugger): that rank names itself, since its launcher then ends the others with a SIGTERM that
// says nothing of the cause. The returned function stops the handling.
//
// failing is set once the rank is already ending on a failure whose message another rank prints:
// the launcher's SIGTERM to the silent ranks is then no news, and saying "run abandoned" would only
// hide the real message.
func handleSignals(
	worldRank int,
	failing *atomic.Bool,
	cleanup *Cleanup,
	doing func() string,
) (stop func()) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			waiting := doing() // before the clean-up, which may take a while
			cleanup.Run()
			switch {
			case failing.Load():
			case waiting != "":
				fmt.Fprintf(
					os.Stderr,
					"cphicache: rank %d: received %s while %s; run abandoned (in-flight copies dropped, shared memory released)\n",
					worldRank,
					SignalName(sig),
					waiting,
				)
			case worldRank == 0:
				fmt.Fprintf(
					os.Stderr,
					"cphicache: received %s; run abandoned (in-flight copies dropped, shared memory released)\n",
					SignalName(sig),
				)
			case sig == syscall.SIGINT:
				fmt.Fprintf(
					os.Stderr,
					"cphicache: world rank %d received %s; run abandoned (in-flight copies dropped, shared memory released); the other ranks end as its launcher ends the job\n",
					worldRank,
					SignalName(sig),
				)
			}
			os.Exit(ExitSignalBase + int(sig.(syscall.Signal)))
		case <-done:
		}
	}()
	return func() {
		signal.Stop(ch)
		close(done)
	}
}

// SignalName is a signal's name as a shell spells it (SIGTERM), for the one line a signal's end
// prints.
func SignalName(sig os.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}
