//go:build cuda

package hicache

import (
	"os"
	"testing"

	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/nccl"
)

// ncclForTest needs NVIDIA's NCCL, named by CPHICACHE_NCCL_LIB (kernels/gpu-check.sh finds one): under make
// that variable names ncclshim, which the GPU build refuses, so the NCCL tests are skipped there.
func ncclForTest(t *testing.T) {
	t.Helper()
	path := os.Getenv(transport.NCCLLibEnv)
	if path == "" {
		t.Skipf("%s is unset: kernels/gpu-check.sh sets it to NVIDIA's libnccl.so.2", transport.NCCLLibEnv)
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
