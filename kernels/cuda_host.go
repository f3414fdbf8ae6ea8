//go:build cuda

package kernels

// This file is the only one that calls the CUDA driver through cgo directly: gorgonia.org/cu v0.9.6
// does not wrap cuMemHostRegister / cuMemHostGetDevicePointer / cuMemHostUnregister, cuMemAllocHost
// or cuDeviceGetPCIBusId. The calls use whatever context is current on the calling OS thread, which
// CUDAEngine.withContext sets.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>

// registerMapped page-locks [p, p+n) and maps it into the device's address space; on success
// *devicePtr is the address kernels use for p.
static CUresult registerMapped(uintptr_t p, size_t n, CUdeviceptr* devicePtr) {
	CUresult r = cuMemHostRegister((void*)p, n, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemHostGetDevicePointer(devicePtr, (void*)p, 0);
	if (r != CUDA_SUCCESS) cuMemHostUnregister((void*)p);
	return r;
}

static CUresult unregister(uintptr_t p) { return cuMemHostUnregister((void*)p); }

// allocMapped allocates n bytes of pinned host memory mapped into the device's address space (the
// staged path's buffer); on success *devicePtr is the address kernels use for *p.
static CUresult allocMapped(void** p, size_t n, CUdeviceptr* devicePtr) {
	CUresult r = cuMemHostAlloc(p, n, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemHostGetDevicePointer(devicePtr, *p, 0);
	if (r != CUDA_SUCCESS) cuMemFreeHost(*p);
	return r;
}

// busID writes the PCI bus id of GPU ordinal ("0000:1b:00.0") into out.
static CUresult busID(int ordinal, char* out, int outBytes) {
	CUdevice dev;
	CUresult r = cuDeviceGet(&dev, ordinal);
	if (r != CUDA_SUCCESS) return r;
	return cuDeviceGetPCIBusId(out, outBytes, dev);
}

static CUresult allocPinned(void** p, size_t n) { return cuMemAllocHost(p, n); }

static CUresult freePinned(void* p) { return cuMemFreeHost(p); }

static const char* errorName(CUresult r) {
	const char* s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) return "unknown CUDA error";
	return s;
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// registerHostMapped registers [hostAddr, hostAddr+lengthBytes) with the GPU and returns its mapped
// device address. The address is passed as an integer: the memory is the shared L2 mapping (mmap),
// not Go heap, and stays registered after the call returns.
func registerHostMapped(hostAddr uintptr, lengthBytes int64) (uintptr, error) {
	var devicePtr C.CUdeviceptr
	if r := C.registerMapped(C.uintptr_t(hostAddr), C.size_t(lengthBytes), &devicePtr); r != C.CUDA_SUCCESS {
		return 0, cudaError(
			fmt.Sprintf("cuMemHostRegister(%#x, %d bytes)", hostAddr, lengthBytes),
			r,
		)
	}
	return uintptr(devicePtr), nil
}

// unregisterHost undoes registerHostMapped.
func unregisterHost(hostAddr uintptr) error {
	if r := C.unregister(C.uintptr_t(hostAddr)); r != C.CUDA_SUCCESS {
		return cudaError(fmt.Sprintf("cuMemHostUnregister(%#x)", hostAddr), r)
	}
	return nil
}

// allocMappedHost allocates lengthBytes of mapped pinned memory (cuMemHostAlloc) and returns it
// with its device address. The slice is C memory, freed by freePinnedBytes, never by Go.
func allocMappedHost(lengthBytes int64) ([]byte, uintptr, error) {
	var p unsafe.Pointer
	var devicePtr C.CUdeviceptr
	if r := C.allocMapped(&p, C.size_t(lengthBytes), &devicePtr); r != C.CUDA_SUCCESS {
		return nil, 0, cudaError(fmt.Sprintf("cuMemHostAlloc(%d bytes, mapped)", lengthBytes), r)
	}
	return unsafe.Slice((*byte)(p), lengthBytes), uintptr(devicePtr), nil
}

// GPUBusID is the PCI bus id of GPU ordinal ("0000:1b:00.0"): the identity NCCL compares when it
// refuses two ranks of a communicator on one GPU, and the same for every process that sees the GPU,
// whatever ordinal CUDA_VISIBLE_DEVICES gives it there.
func GPUBusID(ordinal int) (string, error) {
	var buf [32]C.char
	if r := C.busID(C.int(ordinal), &buf[0], C.int(len(buf))); r != C.CUDA_SUCCESS {
		return "", cudaError(fmt.Sprintf("cuDeviceGetPCIBusId(GPU %d)", ordinal), r)
	}
	return C.GoString(&buf[0]), nil
}

// allocPinnedBytes allocates page-locked host memory (cuMemAllocHost) in the current context: what
// an asynchronous host-to-device copy must read from to be truly asynchronous and ordered on its
// stream. The slice is C memory, freed by freePinnedBytes, never by Go.
func allocPinnedBytes(n int) ([]byte, error) {
	var p unsafe.Pointer
	if r := C.allocPinned(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return nil, cudaError(fmt.Sprintf("cuMemAllocHost(%d bytes)", n), r)
	}
	return unsafe.Slice((*byte)(p), n), nil
}

func freePinnedBytes(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	if r := C.freePinned(unsafe.Pointer(&b[0])); r != C.CUDA_SUCCESS {
		return cudaError("cuMemFreeHost", r)
	}
	return nil
}

func cudaError(op string, r C.CUresult) error {
	return fmt.Errorf("kernels: %s: %s (%d)", op, C.GoString(C.errorName(r)), int(r))
}
