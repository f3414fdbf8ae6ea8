package cli

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// CP groups over several nodes under the real mpirun on one machine: CPHICACHE_NODE_NAME makes each
// part of an MPMD command line ("-np 8 -x CPHICACHE_NODE_NAME=nodeA ... : -np 8 -x
// CPHICACHE_NODE_NAME=nodeB ...") a node.

// nodeLaunch is one part of the command line: np ranks named name ("" leaves the name unset).
type nodeLaunch struct {
	np   int
	name string
}

// runOnNodes launches the binary's parts, each with its node name, bounded in time.
func runOnNodes(
	t *testing.T,
	timeout time.Duration,
	parts []nodeLaunch,
	args ...string,
) mpirunResult {
	t.Helper()
	timeout = loaded(timeout)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var full []string
	for i, p := range parts {
		if i > 0 {
			full = append(full, ":")
		}
		full = append(
			full,
			"-np",
			fmt.Sprint(p.np),
			"--oversubscribe",
			"--mca",
			"mpi_yield_when_idle",
			"1",
		)
		if p.name != "" {
			full = append(full, "-x", "CPHICACHE_NODE_NAME="+p.name)
		}
		full = append(append(full, binPath), args...)
	}
	cmd := exec.CommandContext(ctx, "mpirun", full...)
	cmd.Env = mpirunEnv(t)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf(
			"mpirun %v did not finish within %v\nstdout:\n%s\nstderr:\n%s",
			full,
			timeout,
			stdout.String(),
			stderr.String(),
		)
	}
	res := mpirunResult{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		res.exitCode = ee.ExitCode()
	} else if err != nil {
		res.exitCode = -1
	}
	return res
}

// nodesRunArgs is a short run whose L1 is small enough to evict and load back, with a flush.
func nodesRunArgs(report string, more ...string) []string {
	return append(
		[]string{
			"run",
			"--quiet",
			"--report",
			report,
			"--conversations",
			"24",
			"--turns-max",
			"4",
			"--device-pages",
			"128",
			"--l2-slots",
			"512",
			"--flush-every-requests",
			"40",
		},
		more...)
}

// checkCleanOverNodes checks a run's report: nothing wrong, every committed object audited on each
// of the group's nodes, one consensus a step, and the nodes the group spans; it returns each node's
// slab bytes.
func checkCleanOverNodes(
	t *testing.T,
	name string,
	res mpirunResult,
	m map[string]any,
	wantNodes []string,
) float64 {
	t.Helper()
	if res.exitCode != 0 || !strings.Contains(res.stdout, "result: OK") {
		t.Fatalf("%s: exit %d\n%s%s", name, res.exitCode, res.stdout, res.stderr)
	}
	for _, key := range []string{"placement.divergences", "verify.mismatches", "verify.audit_mismatches", "verify.copy_errors"} {
		if v := reportNumber(t, m, key); v != 0 {
			t.Errorf("%s: %s = %v, want 0", name, key, v)
		}
	}
	if v := reportNumber(t, m, "verify.pages_checked"); v == 0 {
		t.Errorf("%s: no load-back verified", name)
	}
	if audited, committed := reportNumber(t, m, "verify.audit_objects"), reportNumber(t, m, "backup.committed"); committed == 0 ||
		audited != committed*float64(len(wantNodes)) {
		t.Errorf(
			"%s: %v audits of %v committed objects, want one on each of %d nodes",
			name,
			audited,
			committed,
			len(wantNodes),
		)
	}
	if perStep := reportNumber(t, m, "consensus.calls_per_step"); perStep < 1 || perStep > 1.12 {
		t.Errorf("%s: consensus.calls_per_step = %v, want 1 and a flush's worth", name, perStep)
	}
	groups := m["groups"].([]any)
	group := groups[0].(map[string]any)
	if got := fmt.Sprint(group["nodes"]); got != fmt.Sprint(wantNodes) {
		t.Errorf("%s: groups[0].nodes = %s, want %v", name, got, wantNodes)
	}
	if len(wantNodes) > 1 &&
		!strings.Contains(
			res.stdout,
			fmt.Sprintf("spans %d nodes (%s)", len(wantNodes), strings.Join(wantNodes, ", ")),
		) {
		t.Errorf("%s: the summary does not say the nodes:\n%s", name, res.stdout)
	}
	checkNoSegments(t)
	return group["slab_bytes_per_node"].(float64)
}

// TestCP16OverTwoNamedNodes is one CP group of 16 over two nodes of 8, as DeepSeek-V3 in FP8 on two
// 8-GPU nodes: clean, audited on both nodes, and each node's slab half the group's whole slab.
func TestCP16OverTwoNamedNodes(t *testing.T) {
	report := filepath.Join(t.TempDir(), "r.json")
	args := nodesRunArgs(report, "--cp", "16")
	res := runOnNodes(t, 120*time.Second, []nodeLaunch{{8, "nodeA"}, {8, "nodeB"}}, args...)
	m := readReport(t, report)
	perNode := checkCleanOverNodes(t, "cp16 over 2 nodes", res, m, []string{"nodeA", "nodeB"})
	if whole := reportNumber(t, m, "capacity.l2_slab_bytes"); perNode*2 != whole || perNode == 0 {
		t.Errorf(
			"cp16 over 2 nodes: %v slab bytes a node, want half of the group's %v",
			perNode,
			whole,
		)
	}
}

// TestCP8OverTwoNodesOfFourDecidesAsOnOne runs the same CP8 job on one node and over two nodes of
// 4, with copies drained every step so that timing decides nothing: the group's decisions (hits,
// backups, evictions, load-backs) are the same, and each of the two nodes' slabs is half the
// one-node slab.
func TestCP8OverTwoNodesOfFourDecidesAsOnOne(t *testing.T) {
	oneReport, twoReport := filepath.Join(
		t.TempDir(),
		"one.json",
	), filepath.Join(
		t.TempDir(),
		"two.json",
	)
	oneRes := runOnNodes(
		t,
		120*time.Second,
		[]nodeLaunch{{8, ""}},
		nodesRunArgs(oneReport, "--cp", "8", "--sync-copies")...)
	one := readReport(t, oneReport)
	if nodes := one["groups"].([]any)[0].(map[string]any)["nodes"].([]any); len(nodes) != 1 {
		t.Errorf("one node: groups[0].nodes = %v", nodes)
	}
	onePerNode := one["groups"].([]any)[0].(map[string]any)["slab_bytes_per_node"].(float64)
	twoRes := runOnNodes(
		t,
		120*time.Second,
		[]nodeLaunch{{4, "nodeA"}, {4, "nodeB"}},
		nodesRunArgs(twoReport, "--cp", "8", "--sync-copies")...)
	two := readReport(t, twoReport)
	twoPerNode := checkCleanOverNodes(
		t,
		"cp8 over 2 nodes of 4",
		twoRes,
		two,
		[]string{"nodeA", "nodeB"},
	)
	if oneRes.exitCode != 0 || twoPerNode*2 != onePerNode {
		t.Errorf(
			"cp8: one node's slab %v bytes (exit %d), each of two nodes' %v: want half",
			onePerNode,
			oneRes.exitCode,
			twoPerNode,
		)
	}
	for _, key := range []string{"hits.l1_tokens", "hits.l2_tokens", "hits.miss_tokens", "backup.committed", "backup.l2_evictions", "l1.load_backs", "verify.pages_checked"} {
		if a, b := reportNumber(t, one, key), reportNumber(t, two, key); a != b {
			t.Errorf("cp8: %s is %v on one node and %v over two", key, a, b)
		}
	}
}

// TestNodeNameOnSomeRanksIsAUsageError: a name given to one part of the command line only is said
// once, naming a rank with it and one without, with the usage exit status.
func TestNodeNameOnSomeRanksIsAUsageError(t *testing.T) {
	besideOthers(t)
	res := runOnNodes(t, 60*time.Second, []nodeLaunch{{1, "nodeA"}, {1, ""}}, "topo")
	want := "invalid CPHICACHE_NODE_NAME: it is set on world rank 0 but not on world rank 1"
	if res.exitCode != 2 || strings.Count(res.stderr, want) != 1 {
		t.Fatalf("exit %d, want 2 and %q once:\n%s", res.exitCode, want, res.stderr)
	}
}

// TestUnevenNodesWithoutCPSayWhy: --cp left unset makes a CP group of each node's ranks, which
// nodes of 2 and 1 ranks cannot give: the usage error says so, and not that the user gave "--cp 0".
func TestUnevenNodesWithoutCPSayWhy(t *testing.T) {
	besideOthers(t)
	res := runOnNodes(t, 60*time.Second, []nodeLaunch{{2, "nodeA"}, {1, "nodeB"}}, "topo")
	want := "invalid --cp: left unset, which makes a CP group of each node's ranks, but the job's nodes hold different numbers of ranks"
	if res.exitCode != 2 || !strings.Contains(res.stderr, want) {
		t.Fatalf("exit %d, want 2 and %q:\n%s", res.exitCode, want, res.stderr)
	}
}
