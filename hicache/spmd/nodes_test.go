package spmd

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// withNodeName sets CPHICACHE_NODE_NAME on this rank to name(rank) ("" leaves it unset) for the
// test.
func withNodeName(t *testing.T, name func(rank int) string) {
	t.Helper()
	if n := name(testWorld.Rank()); n != "" {
		t.Setenv(NodeNameEnv, n)
	} else {
		t.Setenv(NodeNameEnv, "")
	}
}

// TestNodeNamesSplitOneGroupOverNodes names two nodes in both ways a launcher places ranks (blocks,
// as mpirun's "-np 8 ... : -np 8 ...", and round robin, as --map-by node) and checks every field a
// slab and an audit use.
func TestNodeNamesSplitOneGroupOverNodes(t *testing.T) {
	n := testWorld.Size()
	if n < 2 || n%2 != 0 {
		t.Skip("needs an even number of ranks")
	}
	rank := testWorld.Rank()
	for _, tc := range []struct {
		name       string
		nodeOf     func(r int) int
		wantPartOf func(r int) int
	}{
		{"blocks", func(r int) int { return r / (n / 2) }, func(r int) int { return r % (n / 2) }},
		{"round robin", func(r int) int { return r % 2 }, func(r int) int { return r / 2 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			withNodeName(t, func(r int) string { return fmt.Sprintf("node%c", 'A'+tc.nodeOf(r)) })
			topo, err := NewTopology(testWorld, n, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer topo.Close()
			var wantRanks []int
			for r := range n {
				if tc.nodeOf(r) == tc.nodeOf(rank) {
					wantRanks = append(wantRanks, r)
				}
			}
			if topo.GroupNodes != 2 || topo.NodeParts != n/2 || topo.NodeSize != n/2 ||
				topo.NodePart != tc.wantPartOf(rank) ||
				topo.GroupNode != tc.nodeOf(rank) ||
				!slices.Equal(topo.NodePartRanks, wantRanks) ||
				topo.CPNode.Size() != n/2 {
				t.Errorf(
					"rank %d: nodes %d, parts %d (node size %d), part %d, group node %d, part ranks %v; want 2, %d, part %d, node %d, %v",
					rank,
					topo.GroupNodes,
					topo.NodeParts,
					topo.NodeSize,
					topo.NodePart,
					topo.GroupNode,
					topo.NodePartRanks,
					n/2,
					tc.wantPartOf(rank),
					tc.nodeOf(rank),
					wantRanks,
				)
			}
			rows, err := topo.Gather("")
			if err != nil {
				t.Fatal(err)
			}
			if rows[rank].Host != fmt.Sprintf("node%c", 'A'+tc.nodeOf(rank)) ||
				rows[rank].NodePart != tc.wantPartOf(rank) {
				t.Errorf("rank %d: topo row %+v", rank, rows[rank])
			}
			var b strings.Builder
			WriteTable(&b, rows, topo.CPSize, topo.DPSize)
			if !strings.Contains(b.String(), "2 nodes") ||
				!strings.Contains(b.String(), "node-part") {
				t.Errorf("table does not say 2 nodes and the part index:\n%s", b.String())
			}
		})
	}
}

// TestNodeNamesUnsetKeepOneNode: without names a plain mpirun on one machine is one node, and a
// rank's part is its CP rank, as before groups could span nodes.
func TestNodeNamesUnsetKeepOneNode(t *testing.T) {
	withNodeName(t, func(int) string { return "" })
	topo, err := NewTopology(testWorld, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	if topo.GroupNodes != 1 || topo.NodePart != topo.CPRank || topo.NodeParts != topo.CPSize ||
		topo.GroupNode != 0 {
		t.Errorf(
			"rank %d: %d nodes, part %d of %d, node %d; want one node and part = CP rank %d",
			topo.WorldRank,
			topo.GroupNodes,
			topo.NodePart,
			topo.NodeParts,
			topo.GroupNode,
			topo.CPRank,
		)
	}
}

// TestNodeNameOnSomeRanksIsRefusedOnEveryRank: a name on rank 0 only is one agreed error naming
// both ranks.
func TestNodeNameOnSomeRanksIsRefusedOnEveryRank(t *testing.T) {
	if testWorld.Size() < 2 {
		t.Skip("needs two ranks")
	}
	withNodeName(t, func(r int) string {
		if r == 0 {
			return "nodeA"
		}
		return ""
	})
	_, err := NewTopology(testWorld, 0, 0)
	var ne *NodeNameError
	if !errors.As(err, &ne) || ne.SetRank != 0 || ne.UnsetRank != 1 ||
		!strings.Contains(err.Error(), "set on world rank 0 but not on world rank 1") {
		t.Fatalf(
			"rank %d: %v, want the node-name error naming ranks 0 and 1",
			testWorld.Rank(),
			err,
		)
	}
}

// TestGroupOnUnequalNodesIsRefusedWithBothShares: one rank on node A and the others on node B make
// a CP group whose two slabs would differ; every rank refuses it, naming the two shares.
func TestGroupOnUnequalNodesIsRefusedWithBothShares(t *testing.T) {
	n := testWorld.Size()
	if n < 3 {
		t.Skip("needs three ranks")
	}
	withNodeName(
		t,
		func(r int) string { return map[bool]string{true: "nodeA", false: "nodeB"}[r == 0] },
	)
	_, err := NewTopology(testWorld, n, 0)
	var ce *errscope.ConfigError
	want := fmt.Sprintf("hold 1 and %d of its ranks", n-1)
	if !errors.As(err, &ce) || ce.Flag != "cp" || !strings.Contains(err.Error(), want) {
		t.Fatalf("rank %d: %v, want an error on --cp saying %q", testWorld.Rank(), err, want)
	}
}
