//go:build cuda

package kernels

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/cphicache/cphicache/kernels/cudadriver"
)

// GPUMissing says why this process cannot use a GPU (no CUDA driver, or cuInit's error such as no
// device), or nil: the cuda build starts without either (kernels/cudadriver), and a command that
// needs the GPU asks first.
func GPUMissing() error { return cudadriver.Missing() }

// DeviceCount is the number of GPUs this process can see (CUDA_VISIBLE_DEVICES applies).
func DeviceCount() (int, error) {
	if err := GPUMissing(); err != nil {
		return 0, err
	}
	n, err := cu.NumDevices()
	if err != nil {
		return 0, fmt.Errorf("cuDeviceGetCount: %w", err)
	}
	return n, nil
}

// DeviceWords is a small buffer of 64-bit words in one GPU's memory, with a stream of its own: what
// a reduction that runs on the device (the step consensus over NCCL) needs. The CUDA calls live
// here, so that only package kernels (and nccl, for NCCL) talks to the GPU.
type DeviceWords struct {
	device cu.Device
	ctx    cu.CUContext
	hasCtx bool
	stream cu.Stream
	ptr    cu.DevicePtr
	words  int
}

// NewDeviceWords allocates words uint64 on GPU ordinal, in its primary context, and a non-blocking
// stream.
func NewDeviceWords(ordinal, words int) (*DeviceWords, error) {
	d := &DeviceWords{words: words}
	if err := GPUMissing(); err != nil {
		return nil, fmt.Errorf("device words: GPU %d: %w", ordinal, err)
	}
	var err error
	if d.device, err = cu.GetDevice(ordinal); err != nil {
		return nil, fmt.Errorf("device words: GPU %d: %w", ordinal, err)
	}
	if d.ctx, err = d.device.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("device words: primary context of GPU %d: %w", ordinal, err)
	}
	d.hasCtx = true
	err = d.WithContext(func() error {
		if d.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
			return fmt.Errorf("device words: cuStreamCreate: %w", err)
		}
		if d.ptr, err = cu.MemAlloc(int64(words) * 8); err != nil {
			return fmt.Errorf("device words: cuMemAlloc: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, errors.Join(err, d.Close())
	}
	return d, nil
}

// WithContext runs fn on this goroutine's OS thread, locked, with the GPU's context current: CUDA
// contexts are per thread, and Go moves goroutines between threads. NCCL learns its GPU the same
// way.
func (d *DeviceWords) WithContext(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return fmt.Errorf("device words: cuCtxSetCurrent: %w", err)
	}
	return fn()
}

// RoundTrip copies values to the device buffer, runs op on it (its device address and the stream,
// as integers) and copies the result back into values. Every step is on the one stream, so they are
// ordered, and the stream is synchronised before values is read.
func (d *DeviceWords) RoundTrip(values []uint64, op func(ptr, stream uintptr) error) error {
	n := len(values)
	if n == 0 || n > d.words {
		return fmt.Errorf("device words: %d values, want 1..%d", n, d.words)
	}
	bytes := int64(n) * 8
	host := unsafe.Pointer(&values[0])
	return d.WithContext(func() error {
		if err := cu.MemcpyHtoDAsync(d.ptr, host, bytes, d.stream); err != nil {
			return fmt.Errorf("device words: copying %d words to the GPU: %w", n, err)
		}
		if err := op(uintptr(d.ptr), uintptr(unsafe.Pointer(d.stream.C()))); err != nil {
			return err
		}
		if err := cu.MemcpyDtoHAsync(host, d.ptr, bytes, d.stream); err != nil {
			return fmt.Errorf("device words: copying %d words back: %w", n, err)
		}
		if err := d.stream.Synchronize(); err != nil {
			return fmt.Errorf("device words: the stream: %w", err)
		}
		return nil
	})
}

// Close frees the buffer and the stream and releases the context; it also cleans up after a failed
// NewDeviceWords.
func (d *DeviceWords) Close() error {
	if !d.hasCtx {
		return nil
	}
	err := d.WithContext(func() error {
		var errs []error
		if d.ptr != 0 {
			errs = append(errs, cu.MemFree(d.ptr))
			d.ptr = 0
		}
		if d.stream != (cu.Stream{}) {
			errs = append(errs, d.stream.Destroy())
		}
		return errors.Join(errs...)
	})
	d.hasCtx = false
	return errors.Join(err, d.device.ReleasePrimaryCtx())
}
