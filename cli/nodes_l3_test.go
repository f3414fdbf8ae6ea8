package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The L3 of a CP group over several nodes under the real mpirun: one part-file a node for each
// block.

// nodesL3Args is nodesRunArgs with an L3 in dir whose prefetches are all used, and copies drained
// every step, so that timing decides nothing the two layouts could differ on.
func nodesL3Args(report, dir string) []string {
	return nodesRunArgs(
		report,
		"--cp",
		"8",
		"--sync-copies",
		"--l3-dir",
		dir,
		"--l3-block-tokens",
		"64",
		"--l3-prefetch-threshold",
		"64",
		"--l3-prefetch-policy",
		"wait_complete",
	)
}

// runNodesL3 runs CP8 over parts with an L3 in dir; the run must be clean.
func runNodesL3(
	t *testing.T,
	name string,
	parts []nodeLaunch,
	dir string,
	wantNodes []string,
) map[string]any {
	t.Helper()
	report := filepath.Join(t.TempDir(), "r.json")
	res := runOnNodes(t, 120*time.Second, parts, nodesL3Args(report, dir)...)
	if res.exitCode != 0 || !strings.Contains(res.stdout, "result: OK") {
		t.Fatalf("%s: exit %d\n%s%s", name, res.exitCode, res.stdout, res.stderr)
	}
	m := readReport(t, report)
	if wantNodes != nil {
		checkCleanOverNodes(t, name, res, m, wantNodes)
	}
	checkClean(t, name, m)
	checkNoSegments(t)
	return m
}

// withSuffix keeps the paths that end in suffix.
func withSuffix(paths []string, suffix string) []string {
	var out []string
	for _, p := range paths {
		if strings.HasSuffix(p, suffix) {
			out = append(out, p)
		}
	}
	return out
}

// TestL3OverTwoNodesOfFourServesAsOnOne runs CP8 with an L3 on one node and over two nodes of 4,
// each over a fresh directory and then again over it: the group over two nodes writes two
// part-files a block, one a node, and nothing else; its warm run serves exactly the one-node
// group's L3 hits (the same decisions, byte-checked like every load-back); and once one node's
// part-files are gone, no block is prefetched until it is whole again.
func TestL3OverTwoNodesOfFourServesAsOnOne(t *testing.T) {
	besideOthers(t)
	oneDir, twoDir := t.TempDir(), t.TempDir()
	oneNode := []nodeLaunch{{8, ""}}
	twoNodes := []nodeLaunch{{4, "nodeA"}, {4, "nodeB"}}
	runNodesL3(t, "cold, one node", oneNode, oneDir, nil)
	runNodesL3(t, "cold, two nodes", twoNodes, twoDir, []string{"nodeA", "nodeB"})
	whole, parts := blockFiles(t, oneDir), blockFiles(t, twoDir)
	byPart := map[string]int{}
	for _, suffix := range []string{".p0of2.blk", ".p1of2.blk"} {
		byPart[suffix] = len(withSuffix(parts, suffix))
	}
	if len(whole) == 0 || byPart[".p0of2.blk"] != len(whole) ||
		byPart[".p1of2.blk"] != len(whole) ||
		len(parts) != 2*len(whole) {
		t.Fatalf(
			"one node wrote %d block files; two nodes %d files, %v by part: want one part-file a node for each block",
			len(whole),
			len(parts),
			byPart,
		)
	}
	if stat, want := singleton(t, "l3", "stat", "--l3-dir", twoDir), fmt.Sprintf(": %d blocks (in %d part-files, a part a node", len(whole), len(parts)); !strings.Contains(
		stat,
		want,
	) {
		t.Errorf("l3 stat over the two nodes' directory lacks %q:\n%s", want, stat)
	}

	one := runNodesL3(t, "warm, one node", oneNode, oneDir, nil)
	two := runNodesL3(t, "warm, two nodes", twoNodes, twoDir, []string{"nodeA", "nodeB"})
	for _, key := range []string{"hits.l1_tokens", "hits.l2_tokens", "hits.l3_tokens", "hits.miss_tokens", "l3.prefetch_blocks"} {
		if a, b := reportNumber(t, one, key), reportNumber(t, two, key); a != b {
			t.Errorf("warm: %s is %v on one node and %v over two", key, a, b)
		}
	}
	if hits := reportNumber(t, two, "hits.l3_tokens"); hits == 0 {
		t.Fatalf("the warm run over two nodes served no L3 hit")
	}
	if reads, want := reportNumber(t, two, "l3.reads"), 2*reportNumber(t, one, "l3.reads"); reads != want {
		t.Errorf("two nodes read %v part-files, want %v: each block's two", reads, want)
	}

	for _, p := range withSuffix(blockFiles(t, twoDir), ".p1of2.blk") {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	half := runNodesL3(
		t,
		"nodeB's part-files removed",
		twoNodes,
		twoDir,
		[]string{"nodeA", "nodeB"},
	)
	// The run writes nodeB's part-files again as it computes their blocks, and may serve those; a
	// block whose part was missing when looked for is never prefetched: no reader fails to find its
	// part.
	if hits, warm, failed := reportNumber(t, half, "hits.l3_tokens"),
		reportNumber(t, two, "hits.l3_tokens"),
		reportNumber(t, half, "l3.read_failures"); hits >= warm ||
		failed != 0 {
		t.Errorf(
			"with nodeB's part-files gone: %v L3 hit tokens (the warm run %v), %v failed reads; want fewer hits and no failed read",
			hits,
			warm,
			failed,
		)
	}
}

// TestL3BudgetOverTwoNodes: each node's keeper keeps its node's part-files within half of
// --l3-bytes, so the group's blocks fit --l3-bytes, and evicts the rest.
func TestL3BudgetOverTwoNodes(t *testing.T) {
	dir := t.TempDir()
	const budget = 1 << 20
	report := filepath.Join(t.TempDir(), "r.json")
	res := runOnNodes(t, 120*time.Second, []nodeLaunch{{4, "nodeA"}, {4, "nodeB"}},
		append(nodesL3Args(report, dir), "--l3-bytes", fmt.Sprint(budget))...)
	if res.exitCode != 0 {
		t.Fatalf("exit %d\n%s%s", res.exitCode, res.stdout, res.stderr)
	}
	m := readReport(t, report)
	checkClean(t, "a 1 MiB L3 over two nodes", m)
	for _, suffix := range []string{".p0of2.blk", ".p1of2.blk"} {
		var bytes int64
		files := withSuffix(blockFiles(t, dir), suffix)
		for _, p := range files {
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			bytes += info.Size()
		}
		if len(files) == 0 || bytes > budget/2 {
			t.Errorf(
				"%d %s part-files of %d bytes in all, want some, within half of --l3-bytes %d",
				len(files),
				suffix,
				bytes,
				budget,
			)
		}
	}
	if ev := reportNumber(t, m, "l3.evictions"); ev == 0 {
		t.Errorf("no part-file evicted under a %d-byte budget", budget)
	}
	checkNoSegments(t)
}
