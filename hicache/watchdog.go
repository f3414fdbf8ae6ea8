package hicache

import (
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// ExitWatchdog is the exit status of a rank whose collective outlived the watchdog timeout.
const ExitWatchdog = 3

// watchdogPollInterval bounds how late a timeout is noticed; it costs one wake-up per interval while armed.
const watchdogPollInterval = 100 * time.Millisecond

// Watchdog ends the process when a collective waits longer than its timeout. Arm and Disarm are two atomic
// stores, so they cost nothing measurable on the hot path; a single goroutine polls.
//
// A rank that times out exits with a non-zero status; mpirun (and srun) then ends every other rank of the job,
// including one that hangs outside MPI. A blocked MPI call cannot be interrupted from another thread under
// MPI_THREAD_FUNNELED, which is why the watchdog exits the process rather than aborting through MPI.
type Watchdog struct {
	timeout time.Duration
	out     io.Writer
	exit    func(int)
	cleanup func()

	armedAtNs atomic.Int64 // 0 when disarmed
	what      atomic.Pointer[watchdogSite]

	stopOnce sync.Once
	stop     chan struct{}
}

// watchdogSite says what the armed collective is, for the message.
type watchdogSite struct {
	name     string
	group    int
	commSize int
	step     int64
}

// NewWatchdog starts a watchdog. timeout <= 0 disables it. cleanup runs before the exit (unlink, unmap).
func NewWatchdog(timeout time.Duration, cleanup func()) *Watchdog {
	w := &Watchdog{timeout: timeout, out: os.Stderr, exit: os.Exit, cleanup: cleanup, stop: make(chan struct{})}
	if timeout > 0 {
		go w.poll()
	}
	return w
}

// Arm records that a collective (named for the message) is about to block.
func (w *Watchdog) Arm(name string, group, commSize int, step int64) {
	if w == nil || w.timeout <= 0 {
		return
	}
	site := w.what.Load()
	if site == nil || site.name != name || site.group != group || site.step != step || site.commSize != commSize {
		w.what.Store(&watchdogSite{name: name, group: group, commSize: commSize, step: step})
	}
	w.armedAtNs.Store(time.Now().UnixNano())
}

// Disarm records that the collective returned.
func (w *Watchdog) Disarm() {
	if w == nil {
		return
	}
	w.armedAtNs.Store(0)
}

// Stop ends the polling goroutine.
func (w *Watchdog) Stop() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.stop) })
}

func (w *Watchdog) poll() {
	tick := time.NewTicker(watchdogPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-tick.C:
			armed := w.armedAtNs.Load()
			if armed == 0 {
				continue
			}
			waited := now.Sub(time.Unix(0, armed))
			if waited >= w.timeout {
				w.fire(waited)
				return
			}
		}
	}
}

func (w *Watchdog) fire(waited time.Duration) {
	site := w.what.Load()
	msg := "a collective"
	if site != nil {
		msg = fmt.Sprintf("%s on CP group %d (%d ranks)", site.name, site.group, site.commSize)
		if site.step > 0 { // step 0 is start-up (setup.go), before any step
			msg += fmt.Sprintf(" at step %d", site.step)
		}
	}
	fmt.Fprintf(w.out, "cphicache: rank %d: watchdog: %s waited %.1f s, longer than --watchdog-timeout %.0f s; ending the job\n",
		worldRankForMessages(), msg, waited.Seconds(), w.timeout.Seconds())
	if w.cleanup != nil {
		w.cleanup()
	}
	w.exit(ExitWatchdog)
}

// worldRankForMessages is set once the topology is known.
var worldRankForMessagesValue atomic.Int64

func worldRankForMessages() int64 { return worldRankForMessagesValue.Load() }
