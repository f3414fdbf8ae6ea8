package cli

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Fault tests: every injected fault, every bad input a new user would try, and a signal, each
// bounded in time, each checked for a clear message, a non-zero exit and no shared memory left
// behind.

// faultWatchdogTimeout is the fault tests' --watchdog-timeout: short, so that a test waits little
// for it, yet past what an honest wait takes on a node at load average 20-25 on two cores, where a
// 4-rank job's step broadcast waited 4.7 s and a 3 s timeout ended the job before its injected
// fault (fresh-clone make test beside 8 busy loops).
const faultWatchdogTimeout = 10 * time.Second

func TestInjectedHangEndsWithinTheWatchdogTimeout(t *testing.T) {
	besideOthers(t)
	res, injectedAt := runMPIMarked(
		t,
		4,
		60*time.Second,
		"injected hang at step 5",
		"run",
		"--quiet",
		"--watchdog-timeout",
		faultWatchdogTimeout.String(),
		"--inject-hang",
		"1@5",
	)
	elapsed := time.Since(injectedAt)
	if res.exitCode == 0 {
		t.Fatal("a hung rank did not end the job")
	}
	for _, want := range []string{"injected hang at step 5", "watchdog: step consensus on CP group 0 (4 ranks) at step 5", "--watchdog-timeout 10 s"} {
		if !strings.Contains(res.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.stderr)
		}
	}
	// From the hang: the timeout, the poll interval and mpirun's tear-down, with room for a loaded
	// machine; without the watchdog the job would wait for the test's bound, minutes.
	if elapsed > faultWatchdogTimeout+30*time.Second {
		t.Errorf(
			"the job took %v to end after the hang, with a %v watchdog timeout",
			elapsed,
			faultWatchdogTimeout,
		)
	}
	checkNoSegments(t)
}

func TestInjectedExitEndsTheJob(t *testing.T) {
	besideOthers(t)
	res := runMPI(t, 4, 60*time.Second, "run", "--quiet", "--inject-exit", "3@5")
	if res.exitCode == 0 ||
		!strings.Contains(res.stderr, "rank 3: injected exit at step 5 (--inject-exit)") {
		t.Fatalf("exit %d, stderr:\n%s", res.exitCode, res.stderr)
	}
	checkNoSegments(t)
}

func TestBadInputFailsWithOneClearLine(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty := write("empty.jsonl", "")
	notJSON := write(
		"bad.jsonl",
		`{"rid": "a", "input_ids": [1, 2], "output_len": 4}`+"\nthis is not json\n",
	)
	negative := write("neg.jsonl", `{"rid": "a", "input_ids": [1, 2], "output_len": -3}`+"\n")
	huge := write("huge.jsonl", `{"rid": "a", "input_ids": [1, 2], "output_len": 99999999999}`+"\n")
	outOfRange := write(
		"range.jsonl",
		`{"rid": "a", "input_ids": [1, 40000], "output_len": 4}`+"\n",
	)
	for _, tc := range []struct {
		np   int
		args []string
		want string
	}{
		{2, []string{"run", "--trace", filepath.Join(dir, "missing.jsonl")}, "missing.jsonl"},
		{2, []string{"run", "--trace", empty}, "holds no requests"},
		{2, []string{"run", "--trace", notJSON}, "bad.jsonl:2:"},
		{2, []string{"run", "--trace", negative}, "neg.jsonl:1:"},
		{2, []string{"run", "--trace", huge}, "huge.jsonl:1:"},
		{2, []string{"run", "--trace", outOfRange}, "range.jsonl:1:"},
		{2, []string{"run", "--cp", "0"}, "invalid --cp"},
		{2, []string{"run", "--cp", "4"}, "invalid --cp"},
		{2, []string{"run", "--l2-slots", "100000000", "--token-bytes", "4096"}, "invalid --l2-slots"},
		{2, []string{"run", "--write-policy", "write_sideways"}, "invalid --write-policy"},
		{2, []string{"run", "--layout", "diagonal"}, "invalid --layout"},
		{2, []string{"run", "--collective", "nccl"}, "invalid --collective"},
		{2, []string{"run", "--inject-hang", "x@y"}, "invalid --inject-hang"},
		{2, []string{"run", "--watchdog-timeout", "soon"}, "watchdog-timeout"},
	} {
		// Side by side (make test runs four at a time): each case is mostly mpirun starting and
		// ending two ranks and sleeping (parallel_test.go), and the cases share nothing.
		t.Run("", func(t *testing.T) {
			t.Parallel()
			res := runMPI(t, tc.np, 60*time.Second, tc.args...)
			lines := strings.Split(strings.TrimSpace(cphicacheLines(res.stderr)), "\n")
			if res.exitCode == 0 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf(
					"%v: exit %d, want non-zero and one line naming %q; got:\n%s",
					tc.args,
					res.exitCode,
					tc.want,
					res.stderr,
				)
			}
		})
	}
	t.Cleanup(
		func() { checkNoSegments(t) },
	) // after the parallel cases, which run once this function returns
}

// cphicacheLines keeps the lines cphicache printed, dropping mpirun's own banner about the failed
// job.
func cphicacheLines(stderr string) string {
	var keep []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "cphicache:") || strings.HasPrefix(line, "Incorrect Usage") {
			keep = append(keep, line)
		}
	}
	return strings.Join(keep, "\n")
}

// TestSIGTERMEndsTheRunCleanly signals the run once its provenance header is out, which it prints
// only after its signal handling is in place (cli/run.go): a fixed sleep instead signalled a run
// that a loaded machine had not brought that far, and the signal's default action killed it.
func TestSIGTERMEndsTheRunCleanly(t *testing.T) {
	// A singleton is the process that receives the signal directly, as each rank does under mpirun
	// or srun.
	cmd := exec.Command(binPath, "run", "--trace", writeLongTrace(t), "--quiet")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	header, rest := waitForHeader(t, cmd, 120*time.Second)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(header, "# cphicache ") {
		t.Errorf("the run's first line is not its provenance: %q", header)
	}
	defer func() { // the signal came while the run replayed, not once it had done
		if out := rest(); strings.Contains(out, "result: ") {
			t.Errorf("the run printed its summary, so the signal came after its work:\n%s", out)
		}
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 128+int(syscall.SIGTERM) {
			t.Errorf(
				"exit %v, want status %d; stderr:\n%s",
				err,
				128+int(syscall.SIGTERM),
				stderr.String(),
			)
		}
		if !strings.Contains(stderr.String(), "received SIGTERM; run abandoned") {
			t.Errorf("no one-line reason on stderr:\n%s", stderr.String())
		}
	case <-time.After(120 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the run did not end within 120 s of SIGTERM")
	}
	checkNoSegments(t)
}

// writeLongTrace writes a trace long enough that a singleton is still replaying it when the signal
// comes; the tests that signal a run share one.
func writeLongTrace(t *testing.T) string {
	t.Helper()
	longTraceOnce.Do(func() { longTracePath, longTraceErr = genLongTrace(t) })
	if longTraceErr != nil {
		t.Fatal(longTraceErr)
	}
	return longTracePath
}

var (
	longTraceOnce sync.Once
	longTracePath string
	longTraceErr  error
)

// waitForHeader starts cmd and returns the first line of its standard output once it is there (a
// run's provenance header: its signal handling is in place), failing the test after bound. rest,
// called after cmd.Wait, returns the lines that came after it.
func waitForHeader(
	t *testing.T,
	cmd *exec.Cmd,
	bound time.Duration,
) (header string, rest func() string) {
	t.Helper()
	pr, pw := io.Pipe()
	cmd.Stdout = pw // exec copies into it, and cmd.Wait waits for that copy
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	first, after := make(chan string, 1), make(chan string, 1)
	go func() {
		r := bufio.NewReader(pr)
		line, _ := r.ReadString('\n')
		first <- line
		b, _ := io.ReadAll(r)
		after <- string(b)
	}()
	rest = func() string { pw.Close(); return <-after }
	select {
	case header = <-first:
		return header, rest
	case <-time.After(bound):
		cmd.Process.Kill()
		t.Fatalf("no line on standard output within %v", bound)
		return "", rest
	}
}

// genLongTrace writes the shared trace into a directory TestMain removes after the last test.
func genLongTrace(t *testing.T) (string, error) {
	dir, err := os.MkdirTemp("", "cphicache-long-trace-")
	if err != nil {
		return "", err
	}
	afterTests = append(afterTests, func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "long.jsonl")
	if out, err := exec.Command(binPath, "gen-trace", "--conversations", "4000", "--output", path).CombinedOutput(); err != nil {
		return "", fmt.Errorf("gen-trace: %v\n%s", err, out)
	}
	return path, nil
}

// TestOddConfigurationsFailNamingTheFlag: configurations that pass each flag's own check but not
// the job (a pool whose allocator tables cannot fit in memory, a slot larger than a slab, a byte
// count that overflows, an injection aimed at a rank the job does not have) and negative intervals
// fail with one line naming the right flag, before any shared memory exists, instead of a runtime
// crash or a silent pass.
func TestOddConfigurationsFailNamingTheFlag(t *testing.T) {
	besideOthers(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--l2-slots", "2147483647", "--page-tokens", "1", "--token-bytes", "8", "--layers", "1", "--payloads", "1",
			"--slab-bytes-max", "1073741824"}, "invalid --l2-slots: 2147483647 slots need"},
		{[]string{"--flush-every", "-5"}, "invalid --flush-every"},
		{[]string{"--placement-assert-every", "-1"}, "invalid --placement-assert-every"},
		{[]string{"--slab-bytes-max", "100"}, "invalid --slab-bytes-max"},
		{[]string{"--layers", "10000000000000000"}, "invalid --layers"},
		{[]string{"--page-tokens", "100000000000000000"}, "invalid --page-tokens"},
		{[]string{"--watchdog-timeout", "-5s"}, "invalid --watchdog-timeout"},
		{[]string{"--inject-exit", "2@3"}, "invalid --inject-exit: rank 2 is outside the job's 2 ranks"},
		{[]string{"--inject-divergence", "7@3"}, "invalid --inject-divergence"},
	} {
		t.Run("", func(t *testing.T) {
			t.Parallel() // side by side, as in TestBadInputFailsWithOneClearLine
			res := runMPI(t, 2, 60*time.Second, append([]string{"run", "--quiet"}, tc.args...)...)
			lines := strings.Split(strings.TrimSpace(cphicacheLines(res.stderr)), "\n")
			if res.exitCode == 0 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
				t.Errorf(
					"%v: exit %d, want non-zero and one line saying %q; got:\n%s%s",
					tc.args,
					res.exitCode,
					tc.want,
					res.stdout,
					res.stderr,
				)
			}
		})
	}
	t.Cleanup(func() { checkNoSegments(t) })
}

func TestHelpSaysZeroWatchdogTimeoutIsOff(t *testing.T) {
	out, err := exec.Command(binPath, "run", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "0 = off (no watchdog") {
		t.Fatalf(
			"cphicache run --help: %v; it must say that --watchdog-timeout 0 is off:\n%s",
			err,
			out,
		)
	}
}
