//go:build cuda

package kernels

// This file is the only one that calls the CUDA driver through cgo directly: gorgonia.org/cu v0.9.6 does not
// wrap cuMemHostRegister / cuMemHostGetDevicePointer / cuMemHostUnregister. The calls use whatever context is
// current on the calling OS thread, which CUDAEngine.withContext sets.

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
#include <stdint.h>

// registerMapped page-locks [p, p+n) and maps it into the device's address space; on success *devicePtr is the
// address kernels use for p.
static CUresult registerMapped(uintptr_t p, size_t n, CUdeviceptr* devicePtr) {
	CUresult r = cuMemHostRegister((void*)p, n, CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
	if (r != CUDA_SUCCESS) return r;
	r = cuMemHostGetDevicePointer(devicePtr, (void*)p, 0);
	if (r != CUDA_SUCCESS) cuMemHostUnregister((void*)p);
	return r;
}

static CUresult unregister(uintptr_t p) { return cuMemHostUnregister((void*)p); }

static const char* errorName(CUresult r) {
	const char* s = 0;
	if (cuGetErrorName(r, &s) != CUDA_SUCCESS || s == 0) return "unknown CUDA error";
	return s;
}
*/
import "C"

import "fmt"

// registerHostMapped registers [hostAddr, hostAddr+lengthBytes) with the GPU and returns its mapped device
// address. The address is passed as an integer: the memory is the shared L2 mapping (mmap), not Go heap, and
// stays registered after the call returns.
func registerHostMapped(hostAddr uintptr, lengthBytes int64) (uintptr, error) {
	var devicePtr C.CUdeviceptr
	if r := C.registerMapped(C.uintptr_t(hostAddr), C.size_t(lengthBytes), &devicePtr); r != C.CUDA_SUCCESS {
		return 0, cudaError(fmt.Sprintf("cuMemHostRegister(%#x, %d bytes)", hostAddr, lengthBytes), r)
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

func cudaError(op string, r C.CUresult) error {
	return fmt.Errorf("kernels: %s: %s (%d)", op, C.GoString(C.errorName(r)), int(r))
}
