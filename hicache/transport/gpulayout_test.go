package transport

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The rank-to-GPU layout with made-up device counts: what the GPU build decides on a node it cannot
// see here.

func TestGPULayoutRefusesMoreCPRanksThanGPUs(t *testing.T) {
	// -np 16 on one 8-GPU node with the default --cp (the ranks of the node): NCCL would find GPU 0
	// twice.
	l := gpuLayout{NodeRank: 9, NodeSize: 16, GroupRanksOnNode: 16, VisibleGPUs: 8, Exclusive: true}
	_, err := l.ordinal()
	var ce *errscope.ConfigError
	if !errors.As(err, &ce) || ce.Flag != "collective" {
		t.Fatalf("16 CP ranks on 8 GPUs under nccl: %v, want a --collective error", err)
	}
	for _, want := range []string{"16 ranks on this node", "see 8 GPUs", "CUDA_VISIBLE_DEVICES unset"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("message %q is more than one line", err)
	}
	l.CUDAVisibleDevices = "0,1,2,3,4,5,6,7"
	if _, err := l.ordinal(); err == nil ||
		!strings.Contains(err.Error(), "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7") {
		t.Errorf("message %v does not name CUDA_VISIBLE_DEVICES's value", err)
	}
	// Without NCCL, ranks may share a GPU: the copy engine works with several processes on one
	// device.
	l.Exclusive = false
	if got, err := l.ordinal(); err != nil || got != 1 {
		t.Errorf("--collective mpi, node rank 9 of 16 on 8 GPUs: GPU %d, %v; want GPU 1", got, err)
	}
}

func TestGPULayoutOneVisibleGPUIsUsed(t *testing.T) {
	// Slurm's per-task binding: every rank sees one GPU, which it calls 0, whatever its node rank.
	for rank := range 8 {
		l := gpuLayout{
			NodeRank:           rank,
			NodeSize:           8,
			GroupRanksOnNode:   8,
			VisibleGPUs:        1,
			CUDAVisibleDevices: "0",
			Exclusive:          true,
		}
		if got, err := l.ordinal(); err != nil || got != 0 {
			t.Errorf("node rank %d seeing one GPU: GPU %d, %v; want GPU 0", rank, got, err)
		}
	}
	if _,
		err := (gpuLayout{
		NodeRank: 3, NodeSize: 8, GroupRanksOnNode: 8, CUDAVisibleDevices: "",
	}).ordinal(); err == nil ||
		!strings.Contains(err.Error(), "sees no GPU") {
		t.Errorf("no visible GPU: %v, want an error saying so", err)
	}
}

// TestGPULayoutGivesEachCPRankItsOwnGPU checks every node size, CP size and GPU count up to 16:
// under nccl, a layout is either refused or gives the members of every CP group (consecutive node
// ranks, as spmd.NewTopology makes them) distinct GPUs; and one GPU per CP rank is always accepted.
func TestGPULayoutGivesEachCPRankItsOwnGPU(t *testing.T) {
	for nodeSize := 1; nodeSize <= 16; nodeSize++ {
		for cp := 1; cp <= nodeSize; cp++ {
			if nodeSize%cp != 0 {
				continue
			}
			for gpus := 2; gpus <= 16; gpus++ {
				checkGPULayoutGroups(t, nodeSize, cp, gpus)
			}
		}
	}
}

func checkGPULayoutGroups(t *testing.T, nodeSize, cp, gpus int) {
	t.Helper()
	for first := 0; first < nodeSize; first += cp {
		used := map[int]int{}
		for rank := first; rank < first+cp; rank++ {
			l := gpuLayout{
				NodeRank:         rank,
				NodeSize:         nodeSize,
				GroupRanksOnNode: cp,
				VisibleGPUs:      gpus,
				Exclusive:        true,
			}
			got, err := l.ordinal()
			if err != nil {
				if cp <= gpus {
					t.Fatalf(
						"%d ranks per node, cp %d, %d GPUs: refused (%v), but there is a GPU per CP rank",
						nodeSize,
						cp,
						gpus,
						err,
					)
				}
				return
			}
			if got < 0 || got >= gpus {
				t.Fatalf(
					"%d ranks per node, cp %d, %d GPUs: node rank %d on GPU %d",
					nodeSize,
					cp,
					gpus,
					rank,
					got,
				)
			}
			if other, dup := used[got]; dup {
				t.Fatalf(
					"%d ranks per node, cp %d, %d GPUs: node ranks %d and %d of one CP group share GPU %d",
					nodeSize,
					cp,
					gpus,
					other,
					rank,
					got,
				)
			}
			used[got] = rank
		}
	}
}

func TestCheckDistinctGPUsNamesTheSharingRanks(t *testing.T) {
	if err := checkDistinctGPUs([]string{"0000:1b:00.0", "0000:43:00.0", "0000:52:00.0"}, 0); err != nil {
		t.Errorf("three GPUs refused: %v", err)
	}
	// A one-GPU machine at -np 2: both ranks see one GPU, call it 0, and are on the same device.
	err := checkDistinctGPUs([]string{"0000:1b:00.0", "0000:43:00.0", "0000:1b:00.0"}, 1)
	if err == nil {
		t.Fatal("CP ranks 0 and 2 on one GPU accepted")
	}
	for _, want := range []string{"CP ranks 0 and 2 of CP group 1", "0000:1b:00.0"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not say %q", err, want)
		}
	}
}

func TestTopologyTableShowsGPUsOnlyWhenKnown(t *testing.T) {
	rows := []spmd.RankInfo{
		{WorldRank: 0, Host: "n1"},
		{WorldRank: 1, Host: "n1", NodeRank: 1, CPRank: 1},
	}
	var b strings.Builder
	spmd.WriteTable(&b, rows, 2, 1)
	if strings.Contains(b.String(), "gpu") {
		t.Errorf("CPU build table has a GPU column:\n%s", b.String())
	}
	rows[0].GPU, rows[1].GPU = "0 0000:1b:00.0", "1 0000:43:00.0"
	b.Reset()
	spmd.WriteTable(&b, rows, 2, 1)
	if !strings.Contains(b.String(), "gpu") || !strings.Contains(b.String(), "1 0000:43:00.0\n") {
		t.Errorf("GPU build table does not show each rank's GPU:\n%s", b.String())
	}
}

// TestGPULayoutCountsTheGroupsRanksOnTheNode: CP16 over two 8-GPU nodes puts 8 of the group's ranks
// on each, one GPU apiece under nccl; only the group's share of the node counts, not its whole
// size.
func TestGPULayoutCountsTheGroupsRanksOnTheNode(t *testing.T) {
	for rank := range 8 {
		t.Setenv(cudaVisibleDevicesEnv, "")
		l := newGPULayout(
			&spmd.Topology{NodeRank: rank, NodeSize: 8, CPSize: 16, GroupNodes: 2, NodeParts: 8},
			8,
			true,
		)
		if got, err := l.ordinal(); err != nil || got != rank {
			t.Errorf(
				"CP16 over two nodes, node rank %d: GPU %d, %v; want GPU %d",
				rank,
				got,
				err,
				rank,
			)
		}
	}
}

// TestMultiRankGPUNeedsNCCLsSwitchAndNCCL230: CP ranks may share a GPU under nccl only when the
// user set NCCL_MULTI_RANK_GPU_ENABLE=1 and the NCCL loaded is 2.30 or later (nccl_cuda.go then
// lifts both refusals).
func TestMultiRankGPUNeedsNCCLsSwitchAndNCCL230(t *testing.T) {
	const first = 23000
	cases := []struct {
		enable  string
		version int
		want    bool
	}{{"1", 23000, true}, {"1", 23203, true}, {"1", 22905, false}, {"", 23203, false}, {"0", 23203, false}}
	for _, c := range cases {
		if got := multiRankGPU(c.enable, c.version, first); got != c.want {
			t.Errorf(
				"NCCL_MULTI_RANK_GPU_ENABLE=%q, NCCL %d: shared GPU %v, want %v",
				c.enable,
				c.version,
				got,
				c.want,
			)
		}
	}
}
