package cli

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Fault injections of the copies and of the placement under a real mpirun: a copy that fails, a copy that never
// completes, and a divergence a flush must not forgive.

// A copy that fails on one rank is agreed in its group's next consensus: the job ends at once, with
// that rank's own message, printed once, and no watchdog wait.
func TestInjectedCopyErrorEndsTheJobWithTheFailingRanksMessage(t *testing.T) {
	start := time.Now()
	reportPath := filepath.Join(t.TempDir(), "r.json")
	res := runMPI(
		t,
		8,
		60*time.Second,
		"run",
		"--quiet",
		"--inject-copy-error",
		"3@5",
		"--report",
		reportPath,
	)
	elapsed := time.Since(start)
	if f := readFailedReport(t, reportPath, res).Failure; f.Check != "page copy error" ||
		f.WorldRank != 3 ||
		!strings.Contains(f.Message, "injected copy error") {
		t.Errorf("the report's failure is %+v, want rank 3's page copy error", f)
	}
	lines := strings.Split(strings.TrimSpace(cphicacheLines(res.stderr)), "\n")
	if res.exitCode == 0 || len(lines) != 1 ||
		!strings.Contains(lines[0], "rank 3 (CP group 0, CP rank 3)") ||
		!strings.Contains(lines[0], "page copy failed") ||
		!strings.Contains(lines[0], "injected copy error") {
		t.Errorf(
			"exit %d; want non-zero and one line from rank 3 naming the copy error:\n%s",
			res.exitCode,
			res.stderr,
		)
	}
	// Half the default watchdog timeout (120 s): a job that waited for it could not end sooner, and
	// a loaded machine (a job of 8 ranks took 13 s at load 20 on two cores) can.
	if strings.Contains(res.stderr, "watchdog") || elapsed > 60*time.Second {
		t.Errorf(
			"the job took %v (the watchdog must not be what ends it):\n%s",
			elapsed,
			res.stderr,
		)
	}
	checkNoSegments(t)
}

// A copy that never completes ends the job within the watchdog timeout plus 30 s of its injection
// (the tear-down on a loaded machine; without the watchdog it would wait for the test's bound,
// minutes), named as the drain of the rank that waited for it, mid-run and in the final drain after
// the last step.
func TestInjectedStuckCopyEndsWithinTheWatchdogTimeout(t *testing.T) {
	const timeout = faultWatchdogTimeout
	t.Cleanup(
		func() { checkNoSegments(t) },
	) // after both cases: they run side by side, each mostly waiting
	for _, step := range []string{"5", "199"} { // the default workload has 199 steps at any cp
		t.Run("step"+step, func(t *testing.T) {
			t.Parallel()
			marker := "injected stuck copy at step " + step
			res, injectedAt := runMPIMarked(
				t,
				4,
				60*time.Second,
				marker,
				"run",
				"--quiet",
				"--watchdog-timeout",
				timeout.String(),
				"--inject-stuck-copy",
				"2@"+step,
			)
			if res.exitCode == 0 || injectedAt.IsZero() {
				t.Fatalf("exit %d, stderr:\n%s", res.exitCode, res.stderr)
			}
			named := strings.Contains(res.stderr, "rank 2: watchdog: write drain") ||
				strings.Contains(res.stderr, "rank 2: watchdog: load wait") ||
				strings.Contains(res.stderr, "rank 2: watchdog: copy queue")
			if !named {
				t.Errorf("the watchdog message does not name rank 2's drain:\n%s", res.stderr)
			}
			if took := time.Since(injectedAt); took > timeout+30*time.Second {
				t.Errorf(
					"the job ended %v after the injection, with a %v watchdog timeout",
					took,
					timeout,
				)
			}
		})
	}
}

// runMPIMarked is runMPI that also returns when marker first appeared on stderr (zero if never).
func runMPIMarked(
	t *testing.T,
	np int,
	timeout time.Duration,
	marker string,
	args ...string,
) (mpirunResult, time.Time) {
	t.Helper()
	return runMPIOnMarker(t, np, timeout, marker, nil, args...)
}

// runMPIOnMarker is runMPIMarked that also calls onMarker (when not nil) with the running mpirun as
// soon as marker first appears on stderr or stdout (a run's provenance header, "# cphicache ", says
// every rank's signal handling is in place), for a test that acts on the job mid-run (a signal).
func runMPIOnMarker(
	t *testing.T,
	np int,
	timeout time.Duration,
	marker string,
	onMarker func(*exec.Cmd),
	args ...string,
) (mpirunResult, time.Time) {
	t.Helper()
	timeout = loaded(timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := mpirunCommand(ctx, t, np, args...)
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var markedAt time.Time
	scan := func(r io.Reader, into *strings.Builder, done chan<- struct{}) {
		scanner := bufio.NewScanner(r)
		for scanner.Scan() {
			mu.Lock()
			if markedAt.IsZero() && strings.Contains(scanner.Text(), marker) {
				markedAt = time.Now()
				if onMarker != nil {
					onMarker(cmd)
				}
			}
			into.WriteString(scanner.Text() + "\n")
			mu.Unlock()
		}
		close(done)
	}
	var stdout, stderr strings.Builder
	outDone, errDone := make(chan struct{}), make(chan struct{})
	go scan(outPipe, &stdout, outDone)
	go scan(errPipe, &stderr, errDone)
	<-outDone
	<-errDone
	err = cmd.Wait()
	if ctx.Err() != nil {
		t.Fatalf(
			"mpirun -np %d %v did not finish within %v\nstderr:\n%s",
			np,
			args,
			timeout,
			stderr.String(),
		)
	}
	res := mpirunResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.exitCode = ee.ExitCode()
	} else if err != nil {
		res.exitCode = -1
	}
	return res, markedAt
}

// A flush never forgives a divergence: the perturbation is caught before the reset, by the flush
// itself or by the step consensus before it, whether flushes come from --flush-every or from the
// trace.
func TestFlushDoesNotForgiveADivergence(t *testing.T) {
	besideOthers(t)
	trace := filepath.Join(t.TempDir(), "flushes.jsonl")
	if out, err := exec.Command(binPath, "gen-trace", "--flush-every-requests", "40", "--output", trace).CombinedOutput(); err != nil {
		t.Fatalf("gen-trace: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--inject-divergence", "1@5", "--flush-every", "10", "--placement-assert-every", "10"}, "at step 6 (event"},
		{[]string{"--inject-divergence", "1@9", "--flush-every", "12"}, "at step 10 (event"},
		{[]string{"--inject-divergence", "1@12", "--flush-every", "12"}, "caught by the flush consensus (before the flush's reset)"},
		// 40 requests in steps of 4: the trace's first flush op is step 11.
		{[]string{"--trace", trace, "--inject-divergence", "1@10", "--placement-assert-every", "100"}, "caught by the flush consensus (before the flush's reset)"},
	} {
		t.Run(
			"divergence"+tc.args[slices.Index(tc.args, "--inject-divergence")+1],
			func(t *testing.T) {
				// side by side: each job ends within its first steps, so start-up is most of it
				t.Parallel()
				res := runMPI(
					t,
					8,
					60*time.Second,
					append([]string{"run", "--quiet"}, tc.args...)...)
				if res.exitCode == 0 ||
					!strings.Contains(res.stderr, "placement divergence in CP group 0") ||
					!strings.Contains(res.stderr, tc.want) ||
					!strings.Contains(res.stderr, "CP ranks [1]") {
					t.Errorf(
						"%v: exit %d, want the divergence of CP rank 1 named (%q):\n%s%s",
						tc.args,
						res.exitCode,
						tc.want,
						res.stdout,
						res.stderr,
					)
				}
			},
		)
	}
	t.Cleanup(func() { checkNoSegments(t) })
}
