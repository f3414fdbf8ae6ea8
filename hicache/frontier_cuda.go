//go:build cuda

package hicache

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/nccl"
)

// checkCollectiveBuild accepts both transports in the GPU build, and refuses the CPU build's test switch: here
// NCCL reduces device memory.
func checkCollectiveBuild(collective string) error {
	if collective == "nccl" && os.Getenv(ncclHostBuffersEnv) != "" {
		return &spmd.ConfigError{Flag: "collective", Reason: fmt.Sprintf("%s is a test switch of the CPU build; unset it for the GPU build", ncclHostBuffersEnv)}
	}
	return nil
}

// newFrontierReducer returns writing_check's transport: nil (MPI, the default of newConsensus) for
// --collective mpi, and for nccl the device reducer over NVIDIA's NCCL on this rank's GPU. Every rank calls it
// at start-up, on the MPI goroutine.
func newFrontierReducer(t *spmd.Topology, collective string, initTimeout time.Duration) (MinAllReducer, error) {
	if collective != "nccl" {
		return nil, nil
	}
	f := &deviceNCCLFrontier{}
	err := f.start(t)
	if err == nil && isNCCLShim(f.lib) {
		err = &spmd.ConfigError{Flag: "collective", Reason: fmt.Sprintf("%s=%s is ncclshim, the CPU test stand-in that reduces host memory; the GPU build needs NVIDIA's libnccl.so.2", ncclLibEnv, f.lib.Path())}
	}
	if err := f.joinCP(t, err, initTimeout); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

// deviceNCCLFrontier is writing_check on the GPU: each call copies the local frontier into a small device
// buffer, all-reduces it MIN in place with NCCL on its own stream, synchronises the stream and copies it back.
type deviceNCCLFrontier struct {
	lib       *nccl.Library
	comm      *nccl.Comm
	device    cu.Device
	ctx       cu.CUContext
	busID     string // the GPU's PCI bus id, checked distinct over the CP group before NCCL's init
	hasCtx    bool
	stream    cu.Stream
	valuesPtr cu.DevicePtr // ncclValuesMax uint64 values
}

// start loads NCCL and acquires the GPU resources on this rank's GPU (the engine's, see gpuOrdinal), refusing a
// layout with fewer GPUs than CP ranks.
func (f *deviceNCCLFrontier) start(t *spmd.Topology) error {
	var err error
	if f.lib, err = loadNCCL(); err != nil {
		return err
	}
	ordinal, err := gpuOrdinal(t, true)
	if err != nil {
		return err
	}
	if f.busID, err = kernels.GPUBusID(ordinal); err != nil {
		return err
	}
	if f.device, err = cu.GetDevice(ordinal); err != nil {
		return fmt.Errorf("nccl frontier: GPU %d: %w", ordinal, err)
	}
	if f.ctx, err = f.device.RetainPrimaryCtx(); err != nil {
		return fmt.Errorf("nccl frontier: primary context of GPU %d: %w", ordinal, err)
	}
	f.hasCtx = true
	return f.withContext(func() error {
		if f.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return fmt.Errorf("nccl frontier: cuStreamCreate: %w", err)
		}
		if f.valuesPtr, err = cu.MemAlloc(ncclValuesMax * 8); err != nil {
			return fmt.Errorf("nccl frontier: cuMemAlloc: %w", err)
		}
		return nil
	})
}

// joinCP makes the CP group's NCCL communicator. ready is this rank's start-up outcome: every rank takes part
// in the agreements even when it failed, so that none waits for it. Before NCCL's init, the CP ranks' GPUs are
// checked distinct, so that two ranks on one GPU fail with a line naming them instead of inside NCCL. NCCL
// learns its GPU from the context current on the calling thread (the runtime API's current device), so the
// context is made current first.
func (f *deviceNCCLFrontier) joinCP(t *spmd.Topology, ready error, initTimeout time.Duration) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := spmd.AgreeOnFailure(t.World, ready); err != nil {
		return err
	}
	err := f.checkDistinctGPUs(t)
	if err == nil {
		if err = cu.SetCurrentContext(f.ctx); err != nil {
			err = fmt.Errorf("nccl frontier: cuCtxSetCurrent: %w", err)
		}
	}
	f.comm, err = newNCCLCommOnCP(t, f.lib, err, initTimeout)
	return err
}

// checkDistinctGPUs gathers the CP ranks' PCI bus ids (a CP collective: every rank of the group calls it) and
// refuses a group with two ranks on one GPU.
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
	return checkDistinctGPUs(ids, t.CPGroup)
}

// withContext runs fn on this goroutine's OS thread, locked, with the GPU's context current: CUDA contexts are
// per thread, and Go moves goroutines between threads.
func (f *deviceNCCLFrontier) withContext(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(f.ctx); err != nil {
		return fmt.Errorf("nccl frontier: cuCtxSetCurrent: %w", err)
	}
	return fn()
}

func (f *deviceNCCLFrontier) Name() string { return "nccl" }

// streamHandle is the CUstream as the integer nccl takes.
func (f *deviceNCCLFrontier) streamHandle() uintptr { return uintptr(unsafe.Pointer(f.stream.C())) }

// AllreduceMinUint64 reduces values MIN over the CP group through the device buffer. Every step is on the one
// stream, so the copies and the collective are ordered, and the stream is synchronised before values is read.
func (f *deviceNCCLFrontier) AllreduceMinUint64(values []uint64) error {
	n := len(values)
	if n == 0 || n > ncclValuesMax {
		return fmt.Errorf("nccl frontier: %d values, want 1..%d", n, ncclValuesMax)
	}
	bytes := int64(n) * 8
	host := unsafe.Pointer(&values[0])
	return f.withContext(func() error {
		if err := cu.MemcpyHtoDAsync(f.valuesPtr, host, bytes, f.stream); err != nil {
			return fmt.Errorf("nccl frontier: copying the frontier to the GPU: %w", err)
		}
		p := uintptr(f.valuesPtr)
		if err := f.comm.AllreduceUint64(p, p, n, nccl.Min, f.streamHandle()); err != nil {
			return err
		}
		if err := cu.MemcpyDtoHAsync(host, f.valuesPtr, bytes, f.stream); err != nil {
			return fmt.Errorf("nccl frontier: copying the MIN back: %w", err)
		}
		if err := f.stream.Synchronize(); err != nil {
			return fmt.Errorf("nccl frontier: the all-reduce's stream: %w", err)
		}
		return nil
	})
}

// Close destroys the communicator, frees the device buffer and stream, and unloads NCCL. It releases whatever
// start acquired, so it also cleans up after a failed start.
func (f *deviceNCCLFrontier) Close() error {
	var errs []error
	if f.comm != nil {
		errs = append(errs, f.comm.Destroy())
	}
	if f.hasCtx {
		errs = append(errs, f.withContext(func() error {
			var errs []error
			if f.valuesPtr != 0 {
				errs = append(errs, cu.MemFree(f.valuesPtr))
				f.valuesPtr = 0
			}
			if f.stream != (cu.Stream{}) {
				errs = append(errs, f.stream.Destroy())
			}
			return errors.Join(errs...)
		}))
		errs = append(errs, f.device.ReleasePrimaryCtx())
		f.hasCtx = false
	}
	f.lib.Close()
	return errors.Join(errs...)
}
