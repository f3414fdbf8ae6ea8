//go:build cuda

package cudadriver

// #cgo LDFLAGS: -ldl
// #include "load.h"
import "C"

import "errors"

// Missing says why this process cannot use the GPU: no CUDA driver (libcuda.so.1 not found, or
// CPHICACHE_CUDA_LIB naming a file that does not load), or cuInit's error (CUDA_ERROR_NO_DEVICE on
// a machine with a driver and no GPU). Nil when the driver is loaded and initialised. It is fixed
// once gorgonia.org/cu's package initialiser has called cuInit, which happens before main.
func Missing() error {
	if why := C.cph_cuda_missing(); why != nil {
		return errors.New(C.GoString(why))
	}
	return nil
}
