//go:build !cuda

package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunWithNCCLCollectiveOverTheShim runs `cphicache run --collective nccl` as a user would, with
// the CPU build's test switch and ncclshim (built and named by make through CPHICACHE_NCCL_LIB):
// the step consensus goes through the dlopen'ed library on one communicator per CP group, and the
// report says so.
func TestRunWithNCCLCollectiveOverTheShim(t *testing.T) {
	if os.Getenv("CPHICACHE_NCCL_LIB") == "" {
		t.Skip("CPHICACHE_NCCL_LIB is unset: make test builds ncclshim and sets it")
	}
	t.Setenv("CPHICACHE_NCCL_HOST_BUFFERS", "1")
	for _, np := range []int{2, 8} {
		report := filepath.Join(t.TempDir(), "report.json")
		res := runMPI(
			t,
			np,
			180*time.Second,
			"run",
			"--quiet",
			"--collective",
			"nccl",
			"--report",
			report,
		)
		if res.exitCode != 0 {
			t.Fatalf("np %d: exit %d\n%s%s", np, res.exitCode, res.stdout, res.stderr)
		}
		m := readReport(t, report)
		if m["collective"] != "nccl" {
			t.Errorf("np %d: the report's collective is %v, want nccl", np, m["collective"])
		}
		for _, key := range []string{"placement.divergences", "verify.mismatches"} {
			if v := reportNumber(t, m, key); v != 0 {
				t.Errorf("np %d: %s = %v, want 0", np, key, v)
			}
		}
		if reserved, committed := reportNumber(t, m, "backup.reserved"), reportNumber(t, m, "backup.committed"); reserved == 0 ||
			committed != reserved {
			t.Errorf("np %d: %v backups reserved, %v committed", np, reserved, committed)
		}
		groups, _ := m["groups"].([]any)
		if len(groups) != 1 {
			t.Fatalf("np %d: %d CP groups in the report, want 1", np, len(groups))
		}
		// The step consensus is what travels over NCCL here (writing_check and everything else
		// agreed in a step).
		key := "groups.collectives.step"
		wc, _ := groups[0].(map[string]any)["collectives"].(map[string]any)["step"].(map[string]any)
		if wc == nil || wc["count"].(float64) == 0 || wc["comm_size"] != float64(np) ||
			wc["comm_size_min"] != float64(np) {
			t.Errorf(
				"np %d: %s = %v: want the step consensus run on communicators of exactly %d ranks",
				np,
				key,
				wc,
				np,
			)
		}
	}
	checkNoSegments(t)
}

func TestRunRefusesNCCLCollectiveInTheCPUBuild(t *testing.T) {
	besideOthers(t)
	res := runMPIEnv(
		t,
		1,
		60*time.Second,
		[]string{"CPHICACHE_NCCL_HOST_BUFFERS="},
		"run",
		"--quiet",
		"--collective",
		"nccl",
	)
	if res.exitCode == 0 ||
		!strings.Contains(res.stderr, "invalid --collective: nccl needs the GPU build") {
		t.Errorf("exit %d, stderr:\n%s", res.exitCode, res.stderr)
	}
}
