package spmd

import (
	"strings"
	"testing"
	"time"
)

// testWatchdog is a watchdog whose expiry is reported on a channel instead of ending the process.
func testWatchdog(timeout time.Duration) (*Watchdog, *strings.Builder, chan int) {
	var out strings.Builder
	exited := make(chan int, 1)
	w := &Watchdog{
		timeout:   timeout,
		worldRank: 3,
		out:       &out,
		exit:      func(code int) { exited <- code },
		stop:      make(chan struct{}),
	}
	go w.poll()
	return w, &out, exited
}

func waitFired(t *testing.T, exited chan int) int {
	t.Helper()
	select {
	case code := <-exited:
		return code
	case <-time.After(10 * time.Second):
		t.Fatal("the watchdog did not fire")
		return 0
	}
}

// A start-up phase (step 0) is named without a step that has not begun.
func TestWatchdogNamesTheStartUpPhase(t *testing.T) {
	w, out, exited := testWatchdog(50 * time.Millisecond)
	defer w.Stop()
	w.Arm("start-up: NCCL communicator init", 1, 8, 0)
	code := waitFired(t, exited)
	want := "rank 3: watchdog: start-up: NCCL communicator init on CP group 1 (8 ranks) waited"
	if code != ExitWatchdog || !strings.Contains(out.String(), want) ||
		strings.Contains(out.String(), "at step") {
		t.Errorf(
			"exit %d, message %q: want %d and %q without a step",
			code,
			out.String(),
			ExitWatchdog,
			want,
		)
	}
	// A timeout under a second is said as given, not rounded to "0 s", with the grace a collective
	// adds to it (waited 1.1 s beside "0.05 s" alone read as a watchdog that ignored its timeout).
	if limit := "longer than --watchdog-timeout 0.05 s and a collective's " + CollectiveGrace.String() + " grace;"; !strings.Contains(
		out.String(),
		limit,
	) {
		t.Errorf("message %q: want %q", out.String(), limit)
	}
}

// A drain is bounded as a whole, however many quick collectives run inside it, and it is named with
// its hint; a collective waiting as long fires later (CollectiveGrace), so the drain's rank is the
// one that speaks.
func TestWatchdogBoundsAWholeDrainAndNamesIt(t *testing.T) {
	w, out, exited := testWatchdog(300 * time.Millisecond)
	defer w.Stop()
	w.ArmDrain("write drain", "a backup copy on this rank did not complete", 0, 4, 7)
	w.Arm("step consensus", 0, 4, 7)
	stopQuickCalls := make(chan struct{})
	defer close(stopQuickCalls)
	go func() { // quick collectives inside the drain: each re-arms and disarms the collective slot
		for {
			select {
			case <-stopQuickCalls:
				return
			case <-time.After(20 * time.Millisecond):
				w.Arm("step consensus", 0, 4, 7)
				w.Disarm()
			}
		}
	}()
	code := waitFired(t, exited)
	want := "watchdog: write drain on CP group 0 (4 ranks) at step 7 (a backup copy on this rank did not complete) waited"
	if code != ExitWatchdog || !strings.Contains(out.String(), want) {
		t.Errorf("exit %d, message %q: want the drain named: %q", code, out.String(), want)
	}
}

func TestCleanupRunsWhatIsLeftOnce(t *testing.T) {
	var c Cleanup
	ran := map[string]int{}
	c.Add(func() { ran["kept"]++ })
	remove := c.Add(func() { ran["removed"]++ })
	remove()
	c.Run()
	c.Run()
	if ran["kept"] != 1 || ran["removed"] != 0 {
		t.Errorf("ran %v: want the kept action once and the removed one never", ran)
	}
}

// Doing names the waits of a second or more, the drain and the collective inside it, with how long;
// a quick one is not named, nor a returned one. It is what a rank says when the launcher ends it
// after a peer's watchdog.
func TestWatchdogSaysWhatTheRankIsWaitingIn(t *testing.T) {
	w, _, _ := testWatchdog(time.Minute)
	defer w.Stop()
	now := time.Now()
	w.ArmDrain("write drain", "a backup copy on this rank did not complete", 0, 2, 7)
	w.Arm("step consensus", 0, 2, 7)
	if got := w.Doing(now.Add(500 * time.Millisecond)); got != "" {
		t.Errorf("half a second in: %q, want nothing said", got)
	}
	got := w.Doing(now.Add(3 * time.Second))
	for _, want := range []string{"waiting 3.0 s in write drain on CP group 0 (2 ranks) at step 7 (a backup copy", ", and inside it waiting 3.0 s in step consensus"} {
		if !strings.Contains(got, want) {
			t.Errorf("three seconds in: %q, want %q in it", got, want)
		}
	}
	w.DisarmDrain()
	w.Disarm()
	if got := w.Doing(now.Add(time.Hour)); got != "" {
		t.Errorf("after both returned: %q, want nothing said", got)
	}
	if got := (*Watchdog)(nil).Doing(now); got != "" {
		t.Errorf("no watchdog: %q", got)
	}
}

// A wait noticed far past its limit (the process was not run: an overloaded machine) says so, and
// by how much: a peer starved alike may be as late, which is no hang of its own.
func TestWatchdogSaysWhenItsOwnCheckRanLate(t *testing.T) {
	w, out, exited := testWatchdog(time.Minute)
	defer w.Stop()
	w.fire(
		&watchdogSite{name: "object_compare consensus", commSize: 2, step: 40},
		23200*time.Millisecond,
		11*time.Second,
	)
	if code := waitFired(t, exited); code != ExitWatchdog ||
		!strings.Contains(out.String(), "waited 23.2 s") ||
		!strings.Contains(out.String(), "this check itself ran 12.2 s late") {
		t.Errorf("exit %d, message %q", code, out.String())
	}
}
