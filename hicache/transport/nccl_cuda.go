//go:build cuda

package transport

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/nccl"
)

// CheckCollectiveBuild accepts both transports in the GPU build, and refuses the CPU build's test
// switch: here NCCL reduces device memory.
func CheckCollectiveBuild(collective string) error {
	if collective == "nccl" && os.Getenv(NCCLHostBuffersEnv) != "" {
		return &errscope.ConfigError{
			Flag: "collective",
			Reason: fmt.Sprintf(
				"%s is a test switch of the CPU build; unset it for the GPU build",
				NCCLHostBuffersEnv,
			),
		}
	}
	return nil
}

// NewReducer returns the step consensus's transport for vectors of up to words words: nil (MPI,
// which the consensus does itself) for --collective mpi, and for nccl the device reducer over
// NVIDIA's NCCL on this rank's GPU. Every rank calls it at start-up, on the MPI goroutine.
func NewReducer(
	t *spmd.Topology,
	collective string,
	words int,
	initTimeout time.Duration,
) (MinAllReducer, error) {
	if collective != "nccl" {
		return nil, nil
	}
	f := &deviceNCCLFrontier{}
	err := f.start(t, words)
	if err == nil && IsNCCLShim(f.lib) {
		err = &errscope.ConfigError{
			Flag: "collective",
			Reason: fmt.Sprintf(
				"%s=%s is ncclshim, the CPU test stand-in that reduces host memory; the GPU build needs NVIDIA's libnccl.so.2",
				NCCLLibEnv,
				f.lib.Path(),
			),
		}
	}
	if err := f.joinCP(t, err, initTimeout); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// deviceNCCLFrontier is the consensus's all-reduce on the GPU: each call copies the vector into a
// small device buffer (kernels.DeviceWords), all-reduces it MIN in place with NCCL on the buffer's
// stream, and copies it back.
type deviceNCCLFrontier struct {
	lib   *nccl.Library
	comm  *nccl.Comm
	words *kernels.DeviceWords
	busID string // the GPU's PCI bus id, checked distinct over the CP group before NCCL's init
	// sharedGPU: NCCL_MULTI_RANK_GPU_ENABLE=1 with NCCL 2.30+ lets CP ranks share a GPU
	// (multiRankGPU).
	sharedGPU bool
}

// start loads NCCL and acquires the device buffer on this rank's GPU (the engine's, see
// gpuOrdinal), refusing a layout with fewer GPUs than CP ranks.
func (f *deviceNCCLFrontier) start(t *spmd.Topology, words int) error {
	var err error
	if f.lib, err = loadNCCL(); err != nil {
		return err
	}
	f.sharedGPU = multiRankGPU(
		os.Getenv(nccl.MultiRankGPUEnv),
		f.lib.Version(),
		nccl.MultiRankGPUVersion,
	)
	ordinal, err := gpuOrdinal(t, !f.sharedGPU)
	if err != nil {
		return err
	}
	if f.busID, err = kernels.GPUBusID(ordinal); err != nil {
		return err
	}
	f.words, err = kernels.NewDeviceWords(ordinal, words)
	return err
}

// joinCP makes the CP group's NCCL communicator. ready is this rank's start-up outcome: every rank
// takes part in the agreements even when it failed, so that none waits for it. Before NCCL's init,
// the CP ranks' GPUs are checked distinct, so that two ranks on one GPU fail with a line naming
// them instead of inside NCCL. NCCL learns its GPU from the context current on the calling thread,
// so the init runs inside the buffer's context.
func (f *deviceNCCLFrontier) joinCP(
	t *spmd.Topology,
	ready error,
	initTimeout time.Duration,
) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := spmd.AgreeOnFailure(t.World, ready); err != nil {
		return err
	}
	err := f.checkDistinctGPUs(t)
	entered := false
	ctxErr := f.words.WithContext(func() error {
		entered = true
		f.comm, err = newNCCLCommOnCP(t, f.lib, err, initTimeout)
		return err
	})
	if !entered { // the context could not be made current: still take part in the agreement, failed
		f.comm, err = newNCCLCommOnCP(t, f.lib, ctxErr, initTimeout)
		return err
	}
	return ctxErr
}

// checkDistinctGPUs gathers the CP ranks' PCI bus ids (a CP collective: every rank of the group
// calls it) and refuses a group with two ranks on one GPU.
func (f *deviceNCCLFrontier) checkDistinctGPUs(t *spmd.Topology) error {
	const idBytes = 32
	mine := make([]byte, idBytes)
	copy(mine, f.busID)
	all := make([]byte, idBytes*t.CPSize)
	if err := t.CP.AllgatherBytes(mine, all); err != nil {
		return fmt.Errorf("nccl frontier: gathering the CP group's GPU bus ids: %w", err)
	}
	ids := make([]string, t.CPSize)
	for r := range ids {
		ids[r] = strings.TrimRight(string(all[r*idBytes:(r+1)*idBytes]), "\x00")
	}
	if f.sharedGPU { // the ids were still gathered: every CP rank enters the same collectives
		return nil
	}
	return checkDistinctGPUs(ids, t.CPGroup)
}

func (f *deviceNCCLFrontier) Name() string { return "nccl" }

// AllreduceMinUint64 reduces values MIN over the CP group through the device buffer, on its stream.
func (f *deviceNCCLFrontier) AllreduceMinUint64(values []uint64) error {
	return f.words.RoundTrip(values, func(ptr, stream uintptr) error {
		return f.comm.AllreduceUint64(ptr, ptr, len(values), nccl.Min, stream)
	})
}

// AllreducePreMulSumUint64 sums values multiplied by factor (wrapping) over the CP group, in place,
// through the same device buffer and stream as the MIN: NCCL's pre-multiplied sum, which needs NCCL
// 2.11 or later. The step consensus never calls it. It is there for the tests of the cuda build: a
// one-rank MIN leaves its values as they were, a reduction that did nothing included, and this
// sum's result no copy and no no-op gives, so it proves the reducer's reductions run on the GPU.
func (f *deviceNCCLFrontier) AllreducePreMulSumUint64(values []uint64, factor uint64) error {
	return f.words.RoundTrip(values, func(ptr, stream uintptr) error {
		return f.comm.AllreducePreMulSumUint64(ptr, ptr, len(values), factor, stream)
	})
}

// Close destroys the communicator, frees the device buffer, and unloads NCCL. It releases whatever
// start acquired, so it also cleans up after a failed start.
func (f *deviceNCCLFrontier) Close() error {
	var errs []error
	if f.comm != nil {
		errs = append(errs, f.comm.Destroy())
	}
	if f.words != nil {
		errs = append(errs, f.words.Close())
	}
	if f.lib != nil {
		f.lib.Close()
	}
	return errors.Join(errs...)
}
