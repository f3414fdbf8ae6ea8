//go:build cuda

package runner

import (
	"fmt"
	"os"
	"testing"

	"gorgonia.org/cu"

	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/nccl"
)

// The cuda build's tests make a CUDA engine per run, about fifty in all. Each engine retains GPU
// 0's primary context and releases it when closed, and a context released by its last holder is
// destroyed and made anew by the next (hundreds of milliseconds each, inside gpu-check.sh's bound
// on the step). The test binary holds it for its whole life instead, as a serving process holds it
// for its own; an engine that leaked device memory or modules would then accumulate them rather
// than have them swept away with the context.
func init() {
	dev, err := cu.GetDevice(0)
	if err == nil {
		_, err = dev.RetainPrimaryCtx()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "hicache tests: retaining GPU 0's primary context: %v\n", err)
	}
}

// reducerBuffer is where the NCCL reducer of this build reduces, for the tests' log lines.
const reducerBuffer = "GPU memory, NVIDIA's NCCL"

// noteDeviceRuns logs, when the test passes, how many CUDA engines its runs made: every test that
// makes a job (testJob) calls it, and kernels/gpu-check.sh counts towards its gate only the passed
// tests with such a line, the tests that ran on the GPU; a test refused before its engine (a bad
// option, a CPU-only check) has none.
func noteDeviceRuns(t *testing.T) {
	before := kernels.CUDAEnginesMade()
	t.Cleanup(func() {
		if made := kernels.CUDAEnginesMade() - before; made > 0 && !t.Failed() {
			t.Logf(
				"on-device: %d CUDA engines made on GPU 0 by this test's runs (device KV buffer in GPU memory, /dev/shm slabs registered with it)",
				made,
			)
		}
	})
}

// ncclForTest needs NVIDIA's NCCL, named by CPHICACHE_NCCL_LIB (kernels/gpu-check.sh finds one):
// under make that variable names ncclshim, which the GPU build refuses, so the NCCL tests are
// skipped there.
func ncclForTest(t *testing.T) {
	t.Helper()
	path := os.Getenv(transport.NCCLLibEnv)
	if path == "" {
		t.Skipf(
			"%s is unset: kernels/gpu-check.sh sets it to NVIDIA's libnccl.so.2",
			transport.NCCLLibEnv,
		)
	}
	lib, err := nccl.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if transport.IsNCCLShim(lib) {
		t.Skipf("%s is ncclshim; the GPU build's NCCL tests need NVIDIA's NCCL", path)
	}
}
