package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// These tests run the real binary under the real mpirun, as a user would. The Makefile passes the binary it
// built in CPHICACHE_BIN; without it, TestMain builds one.

var binPath string

func TestMain(m *testing.M) {
	binPath = os.Getenv("CPHICACHE_BIN")
	if binPath == "" {
		dir, err := os.MkdirTemp("", "cphicache-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		binPath = filepath.Join(dir, "cphicache")
		if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
			os.Exit(2)
		}
		defer os.RemoveAll(dir)
	}
	os.Exit(m.Run())
}

// mpirunResult is the outcome of one mpirun of the binary.
type mpirunResult struct {
	stdout, stderr string
	exitCode       int
}

// runMPI launches np ranks of the binary with the flags ../shared/ENVIRONMENT.md requires here, bounded in time
// so that a hang fails the test instead of the suite.
func runMPI(t *testing.T, np int, timeout time.Duration, args ...string) mpirunResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	full := append([]string{"-np", fmt.Sprint(np), "--oversubscribe", "--mca", "mpi_yield_when_idle", "1", binPath}, args...)
	cmd := exec.CommandContext(ctx, "mpirun", full...)
	cmd.Env = append(os.Environ(), "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("mpirun -np %d %v did not finish within %v\nstdout:\n%s\nstderr:\n%s", np, args, timeout, stdout.String(), stderr.String())
	}
	res := mpirunResult{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		res.exitCode = -1
		if ee, ok := err.(*exec.ExitError); ok {
			res.exitCode = ee.ExitCode()
		}
	}
	return res
}

func TestTopoCP8DP2PrintsTwoGroupsOfEight(t *testing.T) {
	res := runMPI(t, 16, 60*time.Second, "topo", "--cp", "8", "--dp", "2")
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	groups := map[string]int{}
	rows := 0
	for _, line := range strings.Split(res.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || strings.HasPrefix(line, "#") {
			continue
		}
		rows++
		groups[f[3]]++
	}
	if rows != 16 || len(groups) != 2 || groups["0"] != 8 || groups["1"] != 8 {
		t.Fatalf("want 16 rows in two CP groups of 8, got %d rows, groups %v:\n%s", rows, groups, res.stdout)
	}
}

func TestBadLayoutFailsNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		np   int
		args []string
		want string
	}{
		{8, []string{"topo", "--cp", "3"}, "invalid --cp"},
		{8, []string{"topo", "--cp", "4", "--dp", "3"}, "invalid --dp"},
		{2, []string{"topo", "--cp", "4"}, "invalid --cp"},
		{2, []string{"topo", "--cp", "0"}, "invalid --cp"},
		{2, []string{"topo", "--log-level", "loud"}, "invalid --log-level"},
		{2, []string{"topo", "--no-such-flag"}, "no-such-flag"},
	} {
		res := runMPI(t, tc.np, 60*time.Second, tc.args...)
		if res.exitCode == 0 {
			t.Errorf("np %d %v: exit 0, want failure", tc.np, tc.args)
		}
		if n := strings.Count(res.stderr, tc.want); n != 1 {
			t.Errorf("np %d %v: %q appears %d times in stderr, want once (printed by one rank):\n%s", tc.np, tc.args, tc.want, n, res.stderr)
		}
	}
}

func TestSingleRankWithoutMpirun(t *testing.T) {
	out, err := exec.Command(binPath, "topo").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "1 ranks, cp 1, dp 1") {
		t.Fatalf("cphicache topo without mpirun: %v\n%s", err, out)
	}
	out, err = exec.Command(binPath, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "cphicache") {
		t.Fatalf("cphicache version: %v\n%s", err, out)
	}
}
