package kernels

import "fmt"

// Engine copies between one rank's device KV buffer and the slabs.
//
// Gather and Scatter validate the whole span list before copying anything, and return when every
// byte has arrived. An Engine may be called from several goroutines; calls are serialized.
type Engine interface {
	Name() string // "host" or "cuda"
	DeviceBytes() int64
	Gather(spans []Span) error // device -> slab (D2H, the backup direction)
	Scatter(
		spans []Span,
	) error // slab -> device (H2D, the load-back direction)
	WriteDevice(offsetBytes int64, src []byte) error // host staging: fill device content
	ReadDevice(offsetBytes int64, dst []byte) error  // host staging: read device content back
	Close() error
}

// CUDALibEnv names the CUDA driver library the cuda build loads at its start in place of
// libcuda.so.1 (kernels/cudadriver): a driver kept outside the loader's path, or a file that does
// not exist, to see the build on a machine with no driver.
const CUDALibEnv = "CPHICACHE_CUDA_LIB"

// CUDAStagedEnv, set to 1, makes the cuda engine stage its copies instead of registering the slabs:
// each registration chunk gets pinned memory the driver allocates (cuMemHostAlloc, mapped), the
// kernel copies between it and the device, and the engine copies between it and the slab. It is the
// GPU check's fallback for a machine that refuses cuMemHostRegister on the shared mapping (a
// sandbox's GPU proxy), and costs a host copy.
const CUDAStagedEnv = "CPHICACHE_CUDA_STAGED"

// Engine kinds accepted by NewEngine.
const (
	KindHost = "host"
	KindCUDA = "cuda"
)

// NewEngine builds the engine of the given kind: KindHost (workers <= 0 means GOMAXPROCS) or
// KindCUDA, which exists only in a binary built with the cuda tag (see CUDABuild) and uses GPU 0.
func NewEngine(kind string, deviceBytes int64, slabs [][]byte, workers int) (Engine, error) {
	switch kind {
	case KindHost:
		return NewHostEngine(deviceBytes, slabs, workers)
	case KindCUDA:
		return newCUDAEngine(deviceBytes, slabs)
	}
	return nil, fmt.Errorf("kernels: unknown engine %q (want %q or %q)", kind, KindHost, KindCUDA)
}

// checkStaging validates a WriteDevice or ReadDevice range against the device buffer.
func checkStaging(op string, offsetBytes int64, lengthBytes int, deviceBytes int64) error {
	n := int64(lengthBytes)
	if offsetBytes < 0 || offsetBytes > deviceBytes || n > deviceBytes-offsetBytes {
		return fmt.Errorf("kernels: %s [%d, %d) out of the device buffer [0, %d)",
			op, offsetBytes, offsetBytes+n, deviceBytes)
	}
	return nil
}

// slabSizes returns the byte length of every slab, the bounds that validateSpans checks against.
func slabSizes(slabs [][]byte) []int64 {
	sizes := make([]int64, len(slabs))
	for i, s := range slabs {
		sizes[i] = int64(len(s))
	}
	return sizes
}
