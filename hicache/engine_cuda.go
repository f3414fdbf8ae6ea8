//go:build cuda

package hicache

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/cphicache/cphicache/kernels"
)

// newCopyEngine is the GPU build's engine: the device KV buffer is cuMemAlloc memory on this rank's GPU, the
// shared L2 slabs are host memory registered with (and mapped into) that GPU, and pagecopy.cu's kernel moves
// the pages.
func newCopyEngine(t *Topology, cfg CacheConfig, slabs [][]byte) (kernels.Engine, error) {
	ordinal, err := gpuOrdinal(t)
	if err != nil {
		return nil, err
	}
	return kernels.NewCUDAEngineOnDevice(ordinal, cfg.DeviceBytes(), slabs)
}

// gpuOrdinal is this rank's GPU: its rank on the node modulo the GPUs it can see. On an 8-GPU node with 8 ranks
// that is one GPU per rank, as a CP group needs; under Slurm's per-task GPU binding (CUDA_VISIBLE_DEVICES holds
// one GPU) it is 0.
func gpuOrdinal(t *Topology) (int, error) {
	count, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("counting GPUs: %w", err)
	}
	if count < 1 {
		return 0, fmt.Errorf("node rank %d on %s sees no GPU", t.NodeRank, t.Host)
	}
	return t.NodeRank % count, nil
}
