package spmd

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ExitWatchdog is the exit status of a rank whose collective or drain outlived the watchdog
// timeout.
const ExitWatchdog = 3

// WatchdogPollInterval bounds how late a timeout is noticed; it costs one wake-up per interval
// while armed.
const WatchdogPollInterval = 100 * time.Millisecond

// CollectiveGrace is how much longer than a drain a collective may wait before the watchdog fires.
// A rank stuck in its own drain (a copy that never completes) is the cause; its peers, waiting for
// it in the next collective, only show the symptom. With the grace the stuck rank's watchdog fires
// first, and the job's message names the drain and the rank, not the collective its peers waited
// in.
const CollectiveGrace = time.Second

// Watchdog ends the process when a collective, or a drain, waits longer than its timeout. Arm and
// Disarm are two atomic stores, so they cost nothing measurable on the hot path; a single goroutine
// polls.
//
// It has two independent slots. The collective slot times one blocking call (a consensus
// all-reduce, the step broadcast). The drain slot times a whole wait that is made of many short
// steps, each of which returns quickly: a rank waiting for its own copies (write drain, load wait),
// or for room in its copy queue. Without the drain slot a copy that never completes would keep a
// rank polling forever, every poll well inside the timeout.
//
// A rank that times out exits with a non-zero status; mpirun (and srun) then ends every other rank
// of the job, including one that hangs outside MPI. A blocked MPI call cannot be interrupted from
// another thread under MPI_THREAD_FUNNELED, which is why the watchdog exits the process rather than
// aborting through MPI.
type Watchdog struct {
	timeout   time.Duration
	worldRank int
	out       io.Writer
	exit      func(int)
	cleanup   func()

	slots [watchdogSlots]watchdogSlot

	stopOnce sync.Once
	stop     chan struct{}
}

const (
	collectiveSlot = iota
	drainSlot
	watchdogSlots
)

// watchdogSlot is one armed wait: when it started (0 when disarmed) and what it is.
type watchdogSlot struct {
	armedAtNs atomic.Int64
	what      atomic.Pointer[watchdogSite]
}

// watchdogSite says what the armed wait is, for the message.
type watchdogSite struct {
	name     string
	group    int
	commSize int
	step     int64
	hint     string // what usually causes it, for the operator
}

// describe names the wait for a message: what, where, at which step, and its usual cause.
func (site *watchdogSite) describe() string {
	if site == nil {
		return "a collective"
	}
	msg := fmt.Sprintf("%s on CP group %d (%d ranks)", site.name, site.group, site.commSize)
	if site.group == WorldGroup {
		msg = fmt.Sprintf("%s over all %d ranks", site.name, site.commSize)
	}
	if site.step > 0 { // step 0 is start-up (transport.Start), before any step
		msg += fmt.Sprintf(" at step %d", site.step)
	}
	if site.hint != "" {
		msg += " (" + site.hint + ")"
	}
	return msg
}

// lateCheck is how far past its limit a wait is noticed before the message says the check was late:
// ten polls.
const lateCheck = 10 * WatchdogPollInterval

// waitWorthSaying is how long a wait must have lasted for Doing to name it: a rank ended in the
// middle of a quick collective has nothing to explain.
const waitWorthSaying = time.Second

// Doing says what this rank has been waiting in for waitWorthSaying or longer ("" when nothing):
// the drain, and a collective inside it, each with how long. A rank that a peer's failure ends (the
// launcher's SIGTERM) says it, so that a job's watchdog line is not the only one: the peers it
// waited for say where they were.
func (w *Watchdog) Doing(now time.Time) string {
	if w == nil || w.timeout <= 0 {
		return ""
	}
	var parts []string
	for _, slot := range []int{drainSlot, collectiveSlot} {
		armed := w.slots[slot].armedAtNs.Load()
		if armed == 0 {
			continue
		}
		if waited := now.Sub(time.Unix(0, armed)); waited >= waitWorthSaying {
			parts = append(
				parts,
				fmt.Sprintf(
					"waiting %.1f s in %s",
					waited.Seconds(),
					w.slots[slot].what.Load().describe(),
				),
			)
		}
	}
	return strings.Join(parts, ", and inside it ")
}

// NewWatchdog starts a watchdog for the rank worldRank (named in its message). timeout <= 0
// disables it. cleanup runs before the exit (unlink, unmap).
func NewWatchdog(timeout time.Duration, worldRank int, cleanup func()) *Watchdog {
	w := &Watchdog{
		timeout:   timeout,
		worldRank: worldRank,
		out:       os.Stderr,
		exit:      os.Exit,
		cleanup:   cleanup,
		stop:      make(chan struct{}),
	}
	if timeout > 0 {
		go w.poll()
	}
	return w
}

// NewWatchdogTo is NewWatchdog with its message written to out and its exit made by exit (which
// must end the waits it fires on): the runner's Env under simulation (hicache's envsim_test.go)
// ends a simulated job with it where a real rank ends its process.
func NewWatchdogTo(
	timeout time.Duration,
	worldRank int,
	out io.Writer,
	exit func(code int),
) *Watchdog {
	w := &Watchdog{
		timeout:   timeout,
		worldRank: worldRank,
		out:       out,
		exit:      exit,
		stop:      make(chan struct{}),
	}
	if timeout > 0 {
		go w.poll()
	}
	return w
}

// WorldGroup is Arm's group for a collective over the whole world (before the CP groups exist).
const WorldGroup = -1

// Arm records that a collective (named for the message) is about to block.
func (w *Watchdog) Arm(name string, group, commSize int, step int64) {
	w.arm(collectiveSlot, watchdogSite{name: name, group: group, commSize: commSize, step: step})
}

// Disarm records that the collective returned.
func (w *Watchdog) Disarm() { w.disarm(collectiveSlot) }

// ArmDrain records that a drain (named for the message, with a hint at its usual cause) begins; it
// stays armed until DisarmDrain, whatever collectives run inside it.
func (w *Watchdog) ArmDrain(name, hint string, group, commSize int, step int64) {
	w.arm(
		drainSlot,
		watchdogSite{name: name, group: group, commSize: commSize, step: step, hint: hint},
	)
}

// DisarmDrain records that the drain ended.
func (w *Watchdog) DisarmDrain() { w.disarm(drainSlot) }

func (w *Watchdog) arm(slot int, site watchdogSite) {
	if w == nil || w.timeout <= 0 {
		return
	}
	s := &w.slots[slot]
	if old := s.what.Load(); old == nil || *old != site {
		s.what.Store(&site)
	}
	s.armedAtNs.Store(time.Now().UnixNano())
}

func (w *Watchdog) disarm(slot int) {
	if w == nil {
		return
	}
	w.slots[slot].armedAtNs.Store(0)
}

// Stop ends the polling goroutine.
func (w *Watchdog) Stop() {
	if w == nil {
		return
	}
	w.stopOnce.Do(func() { close(w.stop) })
}

func (w *Watchdog) poll() {
	tick := time.NewTicker(WatchdogPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-w.stop:
			return
		case now := <-tick.C:
			// The drain slot first: when a drain and a collective inside it are both late, the
			// drain says more.
			for _, slot := range []int{drainSlot, collectiveSlot} {
				armed := w.slots[slot].armedAtNs.Load()
				if armed == 0 {
					continue
				}
				limit := w.timeout
				if slot == collectiveSlot {
					limit += CollectiveGrace
				}
				if waited := now.Sub(time.Unix(0, armed)); waited >= limit {
					w.fire(w.slots[slot].what.Load(), waited, limit)
					return
				}
			}
		}
	}
}

func (w *Watchdog) fire(site *watchdogSite, waited, limit time.Duration) {
	late := ""
	if waited-limit > lateCheck {
		// The poll runs every WatchdogPollInterval: a check this late means the process itself was
		// not run, and a peer on the same machine, starved alike, may be as late as this rank says
		// it is.
		late = fmt.Sprintf(
			"; this check itself ran %.1f s late: the machine did not run this process meanwhile (overloaded?)",
			(waited - limit).Seconds(),
		)
	}
	// The timeout as given (0.5 s, not "0 s"), and the grace a collective's limit adds to it.
	timeout := strconv.FormatFloat(w.timeout.Seconds(), 'g', -1, 64) + " s"
	if grace := limit - w.timeout; grace > 0 {
		timeout += fmt.Sprintf(" and a collective's %v grace", grace)
	}
	fmt.Fprintf(
		w.out,
		"cphicache: rank %d: watchdog: %s waited %.1f s, longer than --watchdog-timeout %s%s; ending the job "+
			"(a rank the launcher then ends in a wait of its own says which)\n",
		w.worldRank,
		site.describe(),
		waited.Seconds(),
		timeout,
		late,
	)
	if w.cleanup != nil {
		w.cleanup()
	}
	w.exit(ExitWatchdog)
}
