//go:build !cuda

package kernels

import "errors"

// CUDABuild reports whether this binary was built with the cuda tag, and so can build a CUDAEngine.
const CUDABuild = false

// GPUMissing is nil in the CPU build, which never uses a GPU.
func GPUMissing() error { return nil }

// newCUDAEngine fails in the CPU build: gorgonia.org/cu cannot even be imported here, because its
// package init exits the process on a machine without a GPU.
func newCUDAEngine(deviceBytes int64, slabs [][]byte) (Engine, error) {
	return nil, errors.New(
		"kernels: the cuda engine needs a binary built with -tags cuda (make gpu)",
	)
}
