//go:build !cuda

package transport

import (
	"fmt"
	"os"
	"runtime"
	"time"
	"unsafe"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/nccl"
)

// CheckCollectiveBuild refuses --collective nccl in the CPU build: NCCL reduces device memory, and
// this build has none. The one exception is the test path of CPHICACHE_NCCL_HOST_BUFFERS=1, which
// setUp further limits to ncclshim.
func CheckCollectiveBuild(collective string) error {
	if collective == "nccl" && os.Getenv(NCCLHostBuffersEnv) != "1" {
		return &errscope.ConfigError{
			Flag:   "collective",
			Reason: "nccl needs the GPU build (make gpu: bin/cphicache-gpu); this binary is the CPU build, use --collective mpi",
		}
	}
	return nil
}

// NewReducer returns the step consensus's transport for vectors of up to words words: nil (MPI,
// which the consensus does itself) for --collective mpi, and for nccl the host-buffer reducer over
// ncclshim. Every rank calls it at start-up.
func NewReducer(
	t *spmd.Topology,
	collective string,
	words int,
	initTimeout time.Duration,
) (MinAllReducer, error) {
	if collective != "nccl" {
		return nil, nil
	}
	lib, err := loadNCCL()
	if err == nil && !IsNCCLShim(lib) {
		err = &errscope.ConfigError{
			Flag: "collective",
			Reason: fmt.Sprintf(
				"%s=1 is for tests with ncclshim (nccl/testdata), but %s is not the shim: NVIDIA's NCCL reduces device memory, which needs the GPU build (make gpu)",
				NCCLHostBuffersEnv,
				lib.Path(),
			),
		}
	}
	comm, err := newNCCLCommOnCP(t, lib, err, initTimeout)
	if err != nil {
		lib.Close()
		return nil, err
	}
	f := &hostNCCLFrontier{lib: lib, comm: comm, values: make([]uint64, words)}
	// The shim's C code reads and writes this buffer through an integer address: pinned, it cannot
	// move.
	f.pinner.Pin(&f.values[0])
	return f, nil
}

// hostNCCLFrontier is the consensus's all-reduce through the NCCL binding on host memory, for tests
// without a GPU: the same dlopen'ed library calls, communicator set-up over the CP group and
// in-place all-reduce MIN as the GPU build, with a host buffer where the GPU build has a device
// buffer.
type hostNCCLFrontier struct {
	lib    *nccl.Library
	comm   *nccl.Comm
	values []uint64 // pinned; the stand-in for the GPU build's device buffer
	pinner runtime.Pinner
}

func (f *hostNCCLFrontier) Name() string { return "nccl" }

// AllreduceMinUint64 copies values into the pinned buffer, reduces it in place and copies the MIN
// back, as the GPU build does through its device buffer.
func (f *hostNCCLFrontier) AllreduceMinUint64(values []uint64) error {
	return f.roundTrip(
		values,
		func(p uintptr) error { return f.comm.AllreduceUint64(p, p, len(values), nccl.Min, 0) },
	)
}

// AllreducePreMulSumUint64 is the GPU build's test-only pre-multiplied sum (nccl_cuda.go), through
// the pinned buffer: the same test runs on both builds.
func (f *hostNCCLFrontier) AllreducePreMulSumUint64(values []uint64, factor uint64) error {
	return f.roundTrip(values, func(p uintptr) error {
		return f.comm.AllreducePreMulSumUint64(p, p, len(values), factor, 0)
	})
}

// roundTrip copies values into the pinned buffer, runs op on its address and copies the result
// back.
func (f *hostNCCLFrontier) roundTrip(values []uint64, op func(p uintptr) error) error {
	n := len(values)
	if n == 0 || n > len(f.values) {
		return fmt.Errorf("nccl frontier: %d values, want 1..%d", n, len(f.values))
	}
	copy(f.values, values)
	if err := op(uintptr(unsafe.Pointer(&f.values[0]))); err != nil {
		return err
	}
	copy(values, f.values[:n])
	return nil
}

// Close destroys the communicator and unloads the library.
func (f *hostNCCLFrontier) Close() error {
	err := f.comm.Destroy()
	f.pinner.Unpin()
	f.lib.Close()
	return err
}
