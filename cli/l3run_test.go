package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/l3"
)

// The L3 end to end: real jobs under mpirun over one --l3-dir, as a user runs them one after
// another.

// l3RunArgs are a run's flags with an L3 in dir: 64-token blocks and a low threshold, so that the
// default workload's prompts make blocks, and wait_complete, so that every agreed prefetch is used.
func l3RunArgs(dir string, more ...string) []string {
	return append(
		[]string{
			"run",
			"--quiet",
			"--l3-dir",
			dir,
			"--l3-block-tokens",
			"64",
			"--l3-prefetch-threshold",
			"64",
			"--l3-prefetch-policy",
			"wait_complete",
		},
		more...)
}

// runL3 runs np ranks with an L3 in dir and returns the report; the run must succeed.
func runL3(t *testing.T, np int, dir string, more ...string) map[string]any {
	t.Helper()
	report := filepath.Join(t.TempDir(), "report.json")
	res := runMPI(t, np, 180*time.Second, l3RunArgs(dir, append(more, "--report", report)...)...)
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	if !strings.Contains(res.stdout, "  L3 (") || !strings.Contains(res.stdout, "L3 hit") {
		t.Errorf("the summary has no L3 lines:\n%s", res.stdout)
	}
	checkNoSegments(t)
	return readReport(t, report)
}

// checkClean: nothing wrong in a report, and no corrupt block read.
func checkClean(t *testing.T, name string, m map[string]any) {
	t.Helper()
	for _, key := range []string{"placement.divergences", "verify.mismatches", "verify.audit_mismatches", "verify.copy_errors", "l3.corrupt", "l3.write_errors"} {
		if v := reportNumber(t, m, key); v != 0 {
			t.Errorf("%s: %s = %v, want 0", name, key, v)
		}
	}
}

// TestL3WarmRestartAtEightRanks: a second job over the directory of a first gets L3 hits, verified
// byte for byte like every load-back (0 mismatches), and its metrics file has the tier="l3" series
// the report has. A third of the default workload's conversations (the whole workload runs at 8
// ranks in TestRunDefaultWorkloadAtEveryScale).
func TestL3WarmRestartAtEightRanks(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	first := runL3(t, 8, dir, "--conversations", "60")
	checkClean(t, "first run", first)
	if w := reportNumber(t, first, "l3.writes"); w <= 0 {
		t.Fatalf("the first run wrote %v blocks", w)
	}
	metrics := filepath.Join(t.TempDir(), "cphicache.prom")
	second := runL3(t, 8, dir, "--conversations", "60", "--metrics-file", metrics)
	checkClean(t, "second run", second)
	l3Hits := reportNumber(t, second, "hits.l3_tokens")
	if l3Hits <= 0 || reportNumber(t, second, "l3.reads") <= 0 ||
		reportNumber(t, second, "verify.pages_checked") <= 0 {
		t.Fatalf(
			"the second run: %v L3 hit tokens, %v blocks read, %v pages verified; want all above 0",
			l3Hits,
			reportNumber(t, second, "l3.reads"),
			reportNumber(t, second, "verify.pages_checked"),
		)
	}
	if cold, warm := reportNumber(t, first, "hits.miss_tokens"), reportNumber(t, second, "hits.miss_tokens"); warm >= cold {
		t.Errorf(
			"the warm run computed %v tokens, the cold one %v: the L3 saved nothing",
			warm,
			cold,
		)
	}
	checkL3Metrics(t, metrics, second)
}

// checkL3Metrics: the metrics file's L3 series equal the report's.
func checkL3Metrics(t *testing.T, path string, m map[string]any) {
	t.Helper()
	families := readMetrics(t, path)
	for _, c := range []struct{ name, labels, key string }{
		{"cphicache_prompt_tokens_total", "tier=l3", "hits.l3_tokens"},
		{"cphicache_l3_blocks_total", "direction=read", "l3.reads"},
		{"cphicache_l3_blocks_total", "direction=write", "l3.writes"},
		{"cphicache_l3_bytes_total", "direction=read", "l3.read_bytes"},
		{"cphicache_l3_corrupt_total", "", "l3.corrupt"},
		{"cphicache_l3_prefetch_timeouts_total", "", "l3.prefetch_timeouts"},
	} {
		// The job's total is the sum of its groups' (or, for a rank's own counters, its ranks')
		// series.
		got, matched := sumSeries(families, c.name, c.labels)
		if matched == 0 {
			t.Errorf("%s{%s} is missing", c.name, c.labels)
			continue
		}
		if want := reportNumber(t, m, c.key); got != want {
			t.Errorf("%s{%s} = %v, report %s = %v", c.name, c.labels, got, c.key, want)
		}
	}
}

// blockFiles lists the published block files under an L3 directory.
func blockFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "*", "*.blk"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestL3CorruptBlocksAreCountedRemovedNeverServed: flipped and truncated bytes in block files
// between two jobs are found by the reading job's checks (l3.corrupt), never reach a device page (0
// mismatches), and are removed, so that a third job does not find them again. A third of the
// default workload's conversations keeps the three jobs short.
func TestL3CorruptBlocksAreCountedRemovedNeverServed(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	small := []string{"--conversations", "60"}
	checkClean(t, "first run", runL3(t, 2, dir, small...))
	files := blockFiles(t, dir)
	if len(files) < 10 {
		t.Fatalf("the first run left %d block files", len(files))
	}
	for i, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			b[len(b)-1-i%64] ^= 0x20 // a payload byte
		} else {
			b = b[:len(b)-8] // a short file
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	second := runL3(t, 2, dir, small...)
	for _, key := range []string{"placement.divergences", "verify.mismatches", "verify.audit_mismatches"} {
		if v := reportNumber(t, second, key); v != 0 {
			t.Errorf("second run: %s = %v, want 0", key, v)
		}
	}
	corrupt := reportNumber(t, second, "l3.corrupt")
	if corrupt <= 0 || reportNumber(t, second, "l3.read_failures") < corrupt ||
		reportNumber(t, second, "l3.prefetch_misses") <= 0 {
		t.Errorf(
			"second run: %v corrupt blocks, %v failed reads, %v prefetches cut short; want corrupt blocks found, each a failed read",
			corrupt,
			reportNumber(t, second, "l3.read_failures"),
			reportNumber(t, second, "l3.prefetch_misses"),
		)
	}
	// A corrupt block is removed when it is found: the third job finds only blocks the second never
	// read (a writer leaves a block file that is there alone, corrupt or not: reads check, writes
	// do not).
	third := runL3(t, 2, dir, small...)
	if found := corrupt + reportNumber(t, third, "l3.corrupt"); found > float64(len(files)) {
		t.Errorf(
			"%v corrupt blocks found in two runs, of %d corrupted: a corrupt block was found twice",
			found,
			len(files),
		)
	}
	for _, key := range []string{"placement.divergences", "verify.mismatches", "verify.audit_mismatches"} {
		if v := reportNumber(t, third, key); v != 0 {
			t.Errorf("third run: %s = %v, want 0", key, v)
		}
	}
}

// TestL3SigkillMidWriteLeavesNoTornBlock: a job killed with SIGKILL while its ranks write blocks
// (fsync on, large blocks, so that writes are in flight) leaves whole blocks or none: every block
// file it left verifies on its own (l3.VerifyFile: header, length, checksum), and the next job over
// the directory reads no corrupt block and verifies every page it loads. Both replay the default
// workload as a trace; the next job replays only its first requests, whose blocks the killed one
// wrote first (the whole workload at 1024 bytes a token wrote 2.7 GB: 12 s of the suite). It cannot
// reach every block the killed job left (a block after one that was still in flight is not a prefix
// hit), hence the file-by-file check.
func TestL3SigkillMidWriteLeavesNoTornBlock(t *testing.T) {
	besideOthers(t)
	dir := t.TempDir()
	trace := filepath.Join(t.TempDir(), "default.jsonl")
	if out, err := exec.Command(binPath, "gen-trace", "--output", trace).CombinedOutput(); err != nil {
		t.Fatalf("gen-trace: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), loaded(120*time.Second))
	defer cancel()
	cmd := mpirunCommand(
		ctx,
		t,
		2,
		l3RunArgs(
			dir,
			"--trace",
			trace,
			"--l3-fsync",
			"--token-bytes",
			"1024",
			"--l3-block-tokens",
			"256",
		)...)
	// No shared-memory transport: a killed job cannot remove OpenMPI's segments, and the test
	// leaves none behind.
	cmd.Args = append(
		cmd.Args[:1],
		append([]string{"--mca", "btl", "self,tcp"}, cmd.Args[1:]...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid: true,
	} // the ranks too: a SIGKILL to mpirun alone would orphan them
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for len(blockFiles(t, dir)) < 20 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	cmd.Wait()
	written := len(blockFiles(t, dir))
	if written < 20 {
		t.Fatalf("only %d blocks written before the kill", written)
	}
	waitForRanksToExit(t, cmd.Process.Pid)
	removeSessionDir(t, cmd.Process.Pid)
	for _, path := range blockFiles(t, dir) {
		if err := l3.VerifyFile(path); err != nil {
			t.Errorf("the killed job left a torn block: %v", err)
		}
	}
	second := runL3(
		t,
		2,
		dir,
		"--trace",
		trace,
		"--trace-limit",
		"40",
		"--token-bytes",
		"1024",
		"--l3-block-tokens",
		"256",
	)
	checkClean(t, "run after the kill", second)
	if reportNumber(t, second, "l3.reads") <= 0 {
		t.Errorf("the run after the kill read no block: the check proves nothing")
	}
}

// removeSessionDir removes what the killed mpirun could not: its OpenMPI session directory
// (TMPDIR/ompi.HOST.UID/pid.PID), which holds PMIx's shared-memory segments.
func removeSessionDir(t *testing.T, pid int) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), "ompi.*", fmt.Sprintf("pid.%d", pid)))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if err := os.RemoveAll(dir); err != nil {
			t.Errorf("removing the killed job's session directory: %v", err)
		}
	}
}

// waitForRanksToExit waits until no process of the killed job's group is left, so that none holds
// the slab.
func waitForRanksToExit(t *testing.T, pgid int) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(-pgid, 0); err != nil {
			return
		}
	}
	out, _ := exec.Command("ps", "-o", "pid,pgid,args", "-g", fmt.Sprint(pgid)).CombinedOutput()
	t.Fatalf("processes of the killed job are still running:\n%s", out)
}
