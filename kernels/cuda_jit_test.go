//go:build cuda

package kernels

import (
	_ "embed"
	"os"
	"testing"

	"gorgonia.org/cu"
)

// The driver reads CUDA_DISABLE_PTX_JIT and CUDA_FORCE_PTX_JIT when it initialises, before any test
// runs, so gpu-check.sh runs this binary once more with each (its module step); run alone, the
// tests skip.
//
// TestCUDAModuleLoadsItsSASSWithoutJIT (CUDA_DISABLE_PTX_JIT=1): the fatbin loads while the same
// kernel's PTX alone is refused, so the process can JIT nothing and what was loaded is the sm_90
// SASS.
func TestCUDAModuleLoadsItsSASSWithoutJIT(t *testing.T) {
	if os.Getenv("CUDA_DISABLE_PTX_JIT") != "1" {
		t.Skip(
			"needs CUDA_DISABLE_PTX_JIT=1 set before the driver starts (gpu-check.sh's module step)",
		)
	}
	e := newTestCUDAEngine(t, 1<<20, nil).(*CUDAEngine)
	var binaryVersion int
	var ptxErr error
	mustOK(t, e.locked(func() error {
		var err error
		if binaryVersion, err = e.copyFn.Attribute(cu.BinaryVersion); err != nil {
			return err
		}
		var m cu.Module
		if m, ptxErr = loadModule(pagecopyPTX); ptxErr == nil {
			return m.Unload()
		}
		return nil
	}))
	if ptxErr == nil {
		t.Fatalf("the PTX alone loaded with CUDA_DISABLE_PTX_JIT=1: the driver ignored it, " +
			"so the fatbin's load proves nothing")
	}
	if binaryVersion != 90 {
		t.Errorf(
			"copy_items has binary version %d, want 90 (the fatbin's sm_90 SASS)",
			binaryVersion,
		)
	}
	t.Logf(
		"proves: with PTX JIT disabled the fatbin's copy_items loaded as binary version %d (sm_90 SASS, "+
			"no JIT) while its PTX alone was refused (%.80v)",
		binaryVersion,
		ptxErr,
	)
}

// TestCUDAModuleJITsItsPTX (CUDA_FORCE_PTX_JIT=1): the driver ignores the SASS and compiles the
// fatbin's compute_90 PTX, as a GPU newer than sm_90 would; the JIT-built kernel must copy byte for
// byte.
func TestCUDAModuleJITsItsPTX(t *testing.T) {
	if os.Getenv("CUDA_FORCE_PTX_JIT") != "1" {
		t.Skip(
			"needs CUDA_FORCE_PTX_JIT=1 set before the driver starts (gpu-check.sh's module step)",
		)
	}
	geometries := cudaGeometries[:2]
	checkGatherScatterRoundTrip(t, newTestCUDAEngine, geometries, 2)
	if !t.Failed() {
		t.Logf(
			"proves: with PTX JIT forced, copy_items built from the fatbin's compute_90 PTX gathered and "+
				"scattered %d geometries byte for byte",
			len(geometries),
		)
	}
}

// pagecopyPTX is the committed PTX of pagecopy.cu, the fatbin's compute_90 image alone.
//
//go:embed cuda/pagecopy.ptx
var pagecopyPTX string
