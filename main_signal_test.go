package main

import (
	"bufio"
	"context"
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

// TestSignalLeavesNoLiveMetricsFile: a periodic metrics file (cphicache_metrics_final 0) is removed when a
// signal ends the run, so that a collector does not read a dead job as a live one.
func TestSignalLeavesNoLiveMetricsFile(t *testing.T) {
	metrics := filepath.Join(t.TempDir(), "cphicache.prom")
	cmd := exec.Command(binPath, "run", "--trace", writeLongTrace(t), "--quiet", "--metrics-file", metrics, "--metrics-interval", "50ms")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(metrics); err == nil {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("no periodic metrics file within 20 s")
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

// TestSignalsUnderMpirun pins down what a signal does under Open MPI's mpirun, as the README says it: a signal
// to the ranks (srun and scancel signal every task) ends the job with 128 + the signal, which mpirun passes on;
// a signal to mpirun itself (Ctrl-C at a terminal) is forwarded to every rank as SIGTERM, each releases its
// shared memory and rank 0 says why, but mpirun exits 1, its own status for a job it aborted.
func TestSignalsUnderMpirun(t *testing.T) {
	trace := writeLongTrace(t)
	for _, tc := range []struct {
		name     string
		toRanks  bool
		sig      syscall.Signal
		wantExit int
		wantLine string
	}{
		{"SIGINT to the ranks", true, syscall.SIGINT, 128 + int(syscall.SIGINT), "received SIGINT; run abandoned"},
		{"SIGTERM to mpirun", false, syscall.SIGTERM, 1, "received SIGTERM; run abandoned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := mpirunCommand(ctx, 2, "run", "--trace", trace)
			pipe, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// The first progress line says the ranks are replaying; the rest of stderr is read after the signal.
			var stderr strings.Builder
			scanner := bufio.NewScanner(pipe)
			for scanner.Scan() {
				stderr.WriteString(scanner.Text() + "\n")
				if strings.Contains(scanner.Text(), "cphicache: progress") {
					break
				}
			}
			drained := make(chan struct{})
			go func() {
				for scanner.Scan() {
					stderr.WriteString(scanner.Text() + "\n")
				}
				close(drained)
			}()
			targets := []int{cmd.Process.Pid}
			if tc.toRanks {
				targets = childPids(t, cmd.Process.Pid)
			}
			for _, pid := range targets {
				syscall.Kill(pid, tc.sig)
			}
			<-drained
			var ee *exec.ExitError
			err = cmd.Wait()
			if !errors.As(err, &ee) || ee.ExitCode() != tc.wantExit || !strings.Contains(stderr.String(), tc.wantLine) {
				t.Errorf("exit %v, want %d and %q:\n%s", err, tc.wantExit, tc.wantLine, stderr.String())
			}
			checkNoSegments(t)
		})
	}
}

// childPids lists the processes whose parent is pid (mpirun's ranks), from /proc.
func childPids(t *testing.T, pid int) []int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(pid), "children"))
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
