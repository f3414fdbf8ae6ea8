//go:build !cuda

package transport

import (
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
)

// DeviceInHostMemory: in the CPU build L1 (the device KV buffer) is host memory, which the start-up
// memory checks count beside the allocator tables.
const DeviceInHostMemory = true

// newCopyEngine is the CPU build's engine: the device KV buffer is host memory and Go copies the
// pages.
func newCopyEngine(_ *spmd.Topology, deviceBytes int64, slabs [][]byte) (kernels.Engine, error) {
	return kernels.NewHostEngine(deviceBytes, slabs, 1)
}

// DescribeGPU is empty in the CPU build: no rank uses a GPU, and the topology table has no GPU
// column.
func DescribeGPU(*spmd.Topology) string { return "" }
