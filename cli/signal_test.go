package cli

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSignalLeavesNoLiveMetricsFile: a periodic metrics file (cphicache_metrics_final 0) is removed
// when a signal ends the run, so that a collector does not read a dead job as a live one.
func TestSignalLeavesNoLiveMetricsFile(t *testing.T) {
	metrics := filepath.Join(t.TempDir(), "cphicache.prom")
	cmd := exec.Command(
		binPath,
		"run",
		"--trace",
		writeLongTrace(t),
		"--quiet",
		"--metrics-file",
		metrics,
		"--metrics-interval",
		"50ms",
	)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(metrics); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no periodic metrics file within 120 s")
		}
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %v, want %d", err, 128+int(syscall.SIGTERM))
	}
	if b, err := os.ReadFile(metrics); err == nil {
		t.Errorf("the periodic metrics file outlived the signal:\n%s", b[:min(len(b), 300)])
	}
	checkNoSegments(t)
}

// TestSignalsUnderMpirun pins down what a signal does under Open MPI's mpirun, as docs/FAILURES.md
// says it: a signal to the ranks (srun and scancel signal every task) ends the job with 128 + the
// signal, which mpirun passes on; a signal to mpirun itself (Ctrl-C at a terminal) is forwarded to
// every rank as SIGTERM, each releases its shared memory and rank 0 says why, but mpirun exits 1,
// its own status for a job it aborted.
func TestSignalsUnderMpirun(t *testing.T) {
	// The SIGTERM to mpirun reaches the ranks only after mpirun's kill timeout (10 s here, below),
	// so that job is a paced one, whose ranks sleep between the arrivals of the serving clock: a
	// replay run flat out burned two cores for those 10 s of each of its tries (20 of the CLI
	// package's 107 CPU-s here, quiet).
	paced := []string{
		"run",
		"--gpu",
		"h100",
		"--prefill-model",
		"llama-3.1-8b",
		"--request-rate",
		"1",
	}
	for _, tc := range []struct {
		name     string
		toRanks  bool
		sig      syscall.Signal
		wantExit int
		wantLine string
		args     []string
	}{
		{"SIGINT to the ranks", true, syscall.SIGINT, 128 + int(syscall.SIGINT), "received SIGINT; run abandoned", []string{"run", "--trace", writeLongTrace(t)}},
		{"SIGTERM to mpirun", false, syscall.SIGTERM, 1, "received SIGTERM; run abandoned", paced},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Open MPI's mpirun, ending a job on its own SIGTERM, stops forwarding the ranks'
			// output as it goes: rank 0's line reached mpirun's stderr in 5 of 6 tries here (rank 0
			// wrote it every time). So the exit status and the leak check hold on every try; the
			// line must come through in one of 3.
			tries := 1
			if !tc.toRanks {
				tries = 3
				// mpirun kills the ranks 1 s after it forwards its SIGTERM: at a load average of 25
				// on two cores a rank still setting up did not release its segment in time. Users
				// on a loaded node give it longer as docs/FAILURES.md says; so does this test (not
				// parallel: Setenv may change the environment here).
				t.Setenv("OMPI_MCA_odls_base_sigkill_timeout", "10")
			}
			var outputs []string
			for range tries {
				exit, stderr := signalJob(t, tc.toRanks, tc.sig, tc.args...)
				if exit != tc.wantExit {
					t.Fatalf("exit %d, want %d:\n%s", exit, tc.wantExit, stderr)
				}
				checkNoSegments(t)
				if strings.Contains(stderr, tc.wantLine) {
					return
				}
				outputs = append(outputs, stderr)
			}
			t.Errorf(
				"%q in none of %d tries:\n%s",
				tc.wantLine,
				tries,
				strings.Join(outputs, "---\n"),
			)
		})
	}
}

// signalJob starts a long 2-rank job of args, signals it (its ranks or mpirun) once its provenance
// header says every rank handles signals, and returns mpirun's exit status and standard error. (It
// waited for the first progress line before: 10% of a long replay, minutes at load 45, where the
// job then outran its bound.)
func signalJob(t *testing.T, toRanks bool, sig syscall.Signal, args ...string) (int, string) {
	t.Helper()
	res, _ := runMPIOnMarker(t, 2, 60*time.Second, "# cphicache ", func(cmd *exec.Cmd) {
		targets := []int{cmd.Process.Pid}
		if toRanks {
			targets = childPids(t, cmd.Process.Pid)
		}
		for _, pid := range targets {
			syscall.Kill(pid, sig)
		}
	}, args...)
	return res.exitCode, res.stderr
}

// childPids lists the processes whose parent is pid (mpirun's ranks), from /proc.
func childPids(t *testing.T, pid int) []int {
	t.Helper()
	b, err := os.ReadFile(
		filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"),
	)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		var p int
		if _, err := fmt.Sscan(f, &p); err == nil {
			pids = append(pids, p)
		}
	}
	if len(pids) == 0 {
		t.Fatalf("mpirun %d has no ranks", pid)
	}
	return pids
}

// TestSignalToBenchReplayEndsItsLaunchAndRemovesItsL3: a SIGTERM to bench replay (scancel, Ctrl-C)
// ends the launch in flight and removes the repeat's L3 directory, which on a real trace holds
// gigabytes, before the command exits 128 + 15. The launcher is a stand-in for mpirun that only
// waits, so the test controls when the signal comes: while a launch is in flight.
func TestSignalToBenchReplayEndsItsLaunchAndRemovesItsL3(t *testing.T) {
	dir := t.TempDir()
	l3Parent, pidFile, launcher := filepath.Join(
		dir,
		"l3",
	), filepath.Join(
		dir,
		"launcher.pid",
	), filepath.Join(
		dir,
		"mpirun",
	)
	trace := filepath.Join(dir, "trace.jsonl")
	if err := os.WriteFile(trace, []byte(`{"timestamp": 0, "input_length": 64, "output_length": 1, "hash_ids": [0]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho $$ > " + pidFile + ".tmp && mv " + pidFile + ".tmp " + pidFile + "\nexec sleep 300\n"
	if err := os.WriteFile(launcher, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(l3Parent, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(
		binPath,
		"bench",
		"replay",
		"--np",
		"2",
		"--repeats",
		"1",
		"--mpirun",
		launcher,
		"--trace",
		trace,
		"--l3-parent",
		l3Parent,
		"--out-dir",
		filepath.Join(dir, "out"),
	)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	pid := waitForPidFile(t, pidFile)
	t.Cleanup(
		func() { syscall.Kill(pid, syscall.SIGKILL) },
	) // when the test fails before its own check
	if entries, _ := os.ReadDir(l3Parent); len(entries) != 1 {
		t.Fatalf("the repeat's L3 directory is not there before the signal: %v", entries)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 128+int(syscall.SIGTERM) {
		t.Fatalf("exit %v, want %d\n%s", err, 128+int(syscall.SIGTERM), stderr.String())
	}
	if !strings.Contains(stderr.String(), "received SIGTERM") {
		t.Errorf("stderr does not say what ended the benchmark:\n%s", stderr.String())
	}
	if entries, _ := os.ReadDir(l3Parent); len(entries) != 0 {
		t.Errorf("bench replay left its L3 behind: %v", entries)
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Errorf("the launch in flight (pid %d) outlived bench replay", pid)
	}
}

// waitForPidFile waits up to 120 s (a bound for a loaded machine) for a process to write its pid.
func waitForPidFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(path); err == nil {
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			return pid
		}
	}
	t.Fatalf("no pid in %s within 120 s", path)
	return 0
}

// TestFailedRunLeavesAStreamMetricsPath: a failed run removes its periodic metrics file, but a
// --metrics-file that is not a regular file (/dev/null; a FIFO here) stays: removed as root,
// /dev/null was gone for every later job on the node.
func TestFailedRunLeavesAStreamMetricsPath(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "m.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	// An hour's interval: no periodic write opens the FIFO (which would wait for a reader) before
	// the failure.
	out, err := exec.Command(binPath, "run", "--quiet", "--metrics-file", fifo, "--metrics-interval", "1h", "--inject-setup-error", "0").
		CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1 (the injected set-up failure):\n%s", err, out)
	}
	if fi, err := os.Lstat(fifo); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("the failed run removed or replaced its --metrics-file FIFO: %v", err)
	}
	checkNoSegments(t)
}
