//go:build cuda

package transport

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
)

// DeviceInHostMemory: in the GPU build L1 is GPU memory, which the host memory checks do not count.
const DeviceInHostMemory = false

// newCopyEngine is the GPU build's engine: the device KV buffer is cuMemAlloc memory on this rank's
// GPU, the shared L2 slabs are host memory registered with (and mapped into) that GPU, and
// pagecopy.cu's kernel moves the pages.
func newCopyEngine(t *spmd.Topology, deviceBytes int64, slabs [][]byte) (kernels.Engine, error) {
	ordinal, err := gpuOrdinal(t, false)
	if err != nil {
		return nil, err
	}
	return kernels.NewCUDAEngineOnDevice(ordinal, deviceBytes, slabs)
}

// gpuOrdinal is this rank's GPU (gpuLayout.ordinal): its rank on the node modulo the GPUs it sees,
// or the one GPU a per-task binding leaves it. exclusive (--collective nccl) refuses CP groups
// larger than the GPUs seen.
func gpuOrdinal(t *spmd.Topology, exclusive bool) (int, error) {
	count, err := kernels.DeviceCount()
	if err != nil {
		return 0, fmt.Errorf(
			"GPU layout: counting GPUs on node rank %d of %s: %w",
			t.NodeRank,
			t.Host,
			err,
		)
	}
	return newGPULayout(t, count, exclusive).ordinal()
}

// DescribeGPU is this rank's GPU for the topology table: the ordinal it would use and its PCI bus
// id, or why it has none.
func DescribeGPU(t *spmd.Topology) string {
	ordinal, err := gpuOrdinal(t, false)
	if err != nil {
		return "none"
	}
	busID, err := kernels.GPUBusID(ordinal)
	if err != nil {
		return fmt.Sprintf("%d (bus id: %v)", ordinal, err)
	}
	return fmt.Sprintf("%d %s", ordinal, busID)
}
