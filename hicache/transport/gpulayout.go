package transport

import (
	"fmt"
	"os"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The rank-to-GPU layout of the GPU build, in pure Go so that the CPU build tests it with made-up
// device counts: engine_cuda.go and nccl_cuda.go feed it the CUDA device count and PCI bus ids.
//
// NCCL refuses two ranks of one communicator on one GPU ("Duplicate GPU detected"), so under
// --collective nccl every rank of a CP group needs a GPU of its own. Ranks of different CP groups
// may share one (two DP replicas on one 8-GPU node at -np 16 --cp 8): they never meet in a
// communicator.

// cudaVisibleDevicesEnv is the variable that restricts, and renumbers, the GPUs a process sees;
// Slurm's per-task GPU binding sets it to one GPU per task.
const cudaVisibleDevicesEnv = "CUDA_VISIBLE_DEVICES"

// gpuLayout is what a rank's GPU choice depends on.
type gpuLayout struct {
	NodeRank, NodeSize int // this rank among the job's ranks on its node, and how many there are
	// this rank's CP group's ranks on its node (all of them on one node; cp/k over k nodes)
	GroupRanksOnNode   int
	VisibleGPUs        int    // cuDeviceGetCount under this rank's CUDA_VISIBLE_DEVICES
	CUDAVisibleDevices string // as set for this rank; "" when unset
	Exclusive          bool   // each CP rank needs its own GPU (--collective nccl)
}

// newGPULayout reads CUDA_VISIBLE_DEVICES for a rank of t that sees visibleGPUs GPUs.
func newGPULayout(t *spmd.Topology, visibleGPUs int, exclusive bool) gpuLayout {
	return gpuLayout{
		NodeRank: t.NodeRank, NodeSize: t.NodeSize, GroupRanksOnNode: t.NodeParts, VisibleGPUs: visibleGPUs,
		CUDAVisibleDevices: os.Getenv(cudaVisibleDevicesEnv), Exclusive: exclusive,
	}
}

// ordinal is this rank's GPU, as a CUDA ordinal among the GPUs it sees. A rank that sees one GPU
// uses it (a per-task binding: whether its CP peers see other GPUs is checkDistinctGPUs's
// question). A rank that sees several takes node rank modulo their number: a CP group's members on
// a node are consecutive node ranks (consecutive world ranks on one node), so they get distinct
// GPUs whenever the group's share of the node is no larger than the GPUs seen, and with fewer GPUs
// than CP ranks an exclusive layout is refused rather than left to fail inside NCCL's init.
func (l gpuLayout) ordinal() (int, error) {
	switch {
	case l.VisibleGPUs < 1:
		return 0, fmt.Errorf(
			"GPU layout: node rank %d sees no GPU (%s)",
			l.NodeRank,
			l.visibleDevicesText(),
		)
	case l.VisibleGPUs == 1:
		return 0, nil
	case l.Exclusive && l.GroupRanksOnNode > l.VisibleGPUs:
		return 0, &errscope.ConfigError{
			Flag: "collective",
			Reason: fmt.Sprintf(
				"nccl needs a GPU per CP rank, but CP groups with %d ranks on a node (%d ranks on this node) see %d GPUs (%s): launch at most %d ranks per CP group on a node (--cp), or bind one GPU per task",
				l.GroupRanksOnNode,
				l.NodeSize,
				l.VisibleGPUs,
				l.visibleDevicesText(),
				l.VisibleGPUs,
			),
		}
	}
	return l.NodeRank % l.VisibleGPUs, nil
}

func (l gpuLayout) visibleDevicesText() string {
	if l.CUDAVisibleDevices == "" {
		return cudaVisibleDevicesEnv + " unset"
	}
	return fmt.Sprintf("%s=%s", cudaVisibleDevicesEnv, l.CUDAVisibleDevices)
}

// multiRankGPU says whether several CP ranks may share a GPU under --collective nccl: only when the
// user set NCCL's own switch (enable, NCCL_MULTI_RANK_GPU_ENABLE=1) and the NCCL loaded has it
// (version code 2.30.0 or later, nccl.MultiRankGPUVersion), which then runs the real multi-rank
// kernels on one GPU. Otherwise a layout with two ranks on one GPU is refused before NCCL's init,
// as NCCL itself would refuse it.
func multiRankGPU(enable string, version, firstVersion int) bool {
	return enable == "1" && version >= firstVersion
}

// checkDistinctGPUs refuses a CP group two of whose ranks use the same GPU. busIDs holds each CP
// rank's PCI bus id (index = CP rank), the identity NCCL's own duplicate check compares: ordinals
// cannot tell, as every rank of a per-task binding calls its GPU 0.
func checkDistinctGPUs(busIDs []string, group int) error {
	first := map[string]int{}
	for rank, id := range busIDs {
		if other, seen := first[id]; seen {
			return &errscope.ConfigError{
				Flag: "collective",
				Reason: fmt.Sprintf(
					"nccl needs a GPU per CP rank, but CP ranks %d and %d of CP group %d both use the GPU at PCI bus id %s (%d CP ranks): give each rank of a CP group its own GPU (CUDA_VISIBLE_DEVICES, or Slurm's --gpus-per-task=1)",
					other,
					rank,
					group,
					id,
					len(busIDs),
				),
			}
		}
		first[id] = rank
	}
	return nil
}
