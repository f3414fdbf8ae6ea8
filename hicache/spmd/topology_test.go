package spmd

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/mpi"
)

func TestResolveGroupsDefaultsAndErrors(t *testing.T) {
	for _, tc := range []struct {
		world, node, cp, dp int
		wantCP, wantDP      int
		wantFlag            string
	}{
		{world: 8, node: 8, wantCP: 8, wantDP: 1},
		{world: 16, node: 8, wantCP: 8, wantDP: 2},
		{world: 16, node: 8, cp: 8, dp: 2, wantCP: 8, wantDP: 2},
		{world: 16, node: 16, dp: 2, wantCP: 8, wantDP: 2},
		{world: 8, node: 8, cp: 4, wantCP: 4, wantDP: 2},
		{world: 1, node: 1, wantCP: 1, wantDP: 1},
		{world: 8, node: 8, cp: 3, wantFlag: "cp"},
		{world: 8, node: 8, cp: 16, wantFlag: "cp"},
		{world: 8, node: 8, cp: 4, dp: 3, wantFlag: "dp"},
		{world: 8, node: 8, cp: -1, wantFlag: "cp"},
		{world: 8, node: 8, dp: -2, wantFlag: "dp"},
	} {
		cp, dp, err := resolveGroups(tc.world, tc.node, true, tc.cp, tc.dp)
		var ce *errscope.ConfigError
		switch {
		case tc.wantFlag != "" && (!errors.As(err, &ce) || ce.Flag != tc.wantFlag):
			t.Errorf(
				"world %d cp %d dp %d: err %v, want an error naming --%s",
				tc.world,
				tc.cp,
				tc.dp,
				err,
				tc.wantFlag,
			)
		case tc.wantFlag != "" && !strings.Contains(err.Error(), "--"+tc.wantFlag):
			t.Errorf("message %q does not name --%s", err, tc.wantFlag)
		case tc.wantFlag == "" && (err != nil || cp != tc.wantCP || dp != tc.wantDP):
			t.Errorf(
				"world %d cp %d dp %d: got cp %d dp %d err %v, want cp %d dp %d",
				tc.world,
				tc.cp,
				tc.dp,
				cp,
				dp,
				err,
				tc.wantCP,
				tc.wantDP,
			)
		}
	}
	// --dp alone that does not divide the job: the message is about the dp given, and no cp the
	// user never gave.
	_, _, err := resolveGroups(8, 8, true, 0, 3)
	if err == nil ||
		!strings.Contains(
			err.Error(),
			"invalid --dp: 3 replicas do not divide the job's 8 ranks",
		) ||
		strings.Contains(err.Error(), "cp") ||
		!strings.Contains(err.Error(), "(1, 2, 4, 8)") {
		t.Errorf("--dp 3 on 8 ranks: %v", err)
	}
	if _, _, err := resolveGroups(16, 8, false, 0, 0); err == nil {
		t.Error("automatic --cp accepted nodes of different sizes")
	}
}

// TestTopologyGroupsAreConsecutiveAndScoped builds the topology for every CP size that divides the
// launch and checks that each CP communicator holds exactly its consecutive ranks: a collective on
// it sees cp ranks, never the world and never another group.
func TestTopologyGroupsAreConsecutiveAndScoped(t *testing.T) {
	n := testWorld.Size()
	for cp := 1; cp <= n; cp++ {
		if n%cp != 0 {
			continue
		}
		topo, err := NewTopology(testWorld, cp, 0)
		if err != nil {
			t.Fatalf("cp %d of %d ranks: %v", cp, n, err)
		}
		checkTopology(t, topo, cp, n/cp)
		topo.Close()
	}
}

func checkTopology(t *testing.T, topo *Topology, cp, dp int) {
	t.Helper()
	rank := testWorld.Rank()
	if topo.CPSize != cp || topo.DPSize != dp || topo.CP.Size() != cp {
		t.Fatalf(
			"cp %d: topology says cp %d dp %d, communicator size %d",
			cp,
			topo.CPSize,
			topo.DPSize,
			topo.CP.Size(),
		)
	}
	if topo.CPGroup != rank/cp || topo.CPRank != rank%cp {
		t.Errorf(
			"rank %d: group %d cp-rank %d, want %d and %d",
			rank,
			topo.CPGroup,
			topo.CPRank,
			rank/cp,
			rank%cp,
		)
	}
	members := make([]int64, cp)
	if err := topo.CP.AllgatherInt64([]int64{int64(rank)}, members); err != nil {
		t.Fatal(err)
	}
	for i, m := range members {
		if want := int64(topo.CPGroup*cp + i); m != want {
			t.Errorf("rank %d: CP member %d is world rank %d, want %d", rank, i, m, want)
		}
	}
}

func TestTopologyRejectsBadCPOnEveryRank(t *testing.T) {
	n := testWorld.Size()
	_, err := NewTopology(testWorld, n+1, 0)
	var ce *errscope.ConfigError
	if !errors.As(err, &ce) || ce.Flag != "cp" {
		t.Fatalf("cp %d on %d ranks: %v, want an error naming --cp", n+1, n, err)
	}
	if n > 1 {
		_, err = NewTopology(testWorld, 1, n+1)
		if !errors.As(err, &ce) || ce.Flag != "dp" {
			t.Fatalf("dp %d on %d ranks: %v, want an error naming --dp", n+1, n, err)
		}
	}
}

func TestTopologyGatherMapsEveryRank(t *testing.T) {
	topo, err := NewTopology(testWorld, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer topo.Close()
	rows, err := topo.Gather("")
	if err != nil {
		t.Fatal(err)
	}
	host, _ := mpi.ProcessorName()
	if len(rows) != testWorld.Size() || rows[testWorld.Rank()].Host != host {
		t.Fatalf(
			"rank %d: %d rows, own host %q, want %d rows and %q",
			testWorld.Rank(),
			len(rows),
			rows[testWorld.Rank()].Host,
			testWorld.Size(),
			host,
		)
	}
	var b strings.Builder
	WriteTable(&b, rows, topo.CPSize, topo.DPSize)
	if lines := strings.Count(b.String(), "\n"); lines != len(rows)+2 {
		t.Errorf(
			"table has %d lines, want a 2-line header and %d rows:\n%s",
			lines,
			len(rows),
			b.String(),
		)
	}
}

// TestPluralSaysOneRank: summaries say "1 rank" and "8 ranks", never "1 ranks".
func TestPluralSaysOneRank(t *testing.T) {
	if got := errscope.Plural(1, "rank") + ", " + errscope.Plural(8, "rank") + ", " + errscope.Plural(0, "namespace"); got != "1 rank, 8 ranks, 0 namespaces" {
		t.Errorf("got %q", got)
	}
}
