//go:build cuda

package kernels

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"

	"gorgonia.org/cu"
)

// CUDABuild reports whether this binary was built with the cuda tag, and so can build a CUDAEngine.
const CUDABuild = true

const (
	// cudaThreadsPerBlock matches __launch_bounds__(256) in pagecopy.cu: 8 warps, 8 items at a time
	// per block.
	cudaThreadsPerBlock = 256
	// cudaItemsMin is the item buffer's first capacity; it doubles when a call needs more.
	cudaItemsMin = 4096
	// cudaJITLogBytes is each of the two logs the driver fills when it loads the module (an error
	// and an info log), so that a load that has to compile the PTX and fails says why.
	cudaJITLogBytes = 4096
)

// CUDAEngine is the cuda build's engine: the device KV buffer is cuMemAlloc memory (never managed
// memory), the slabs are registered with the GPU and mapped, and the copy_items kernel of
// pagecopy.cu moves the bytes. Calls are serialized; each runs on a locked OS thread with the
// engine's (primary) context current.
type CUDAEngine struct {
	mu          sync.Mutex
	device      cu.Device
	ctx         cu.CUContext
	deviceBytes int64
	devicePtr   cu.DevicePtr
	slabs       [][]byte
	slabBytes   []int64
	chunks      []cudaChunk // sorted by hostAddr, not overlapping
	module      cu.Module
	copyFn      cu.Function
	stream      cu.Stream
	// the grid's bound: SMs x the blocks of copy_items one SM holds at once (occupancy)
	blocksMax   int
	blocksPerSM int
	spans       []Span // scratch: the caller's spans, coalesced
	// scratch: the items of one call, staged in itemsHost and uploaded to itemsPtr
	items []cudaItem
	// pinned (cuMemAllocHost) staging of itemsCap items: C memory, not Go heap
	itemsHost []cudaItem
	itemsPtr  cu.DevicePtr
	itemsCap  int
	hasModule bool
	staged    bool // CUDAStagedEnv: the chunks are staging, not registrations of the slabs
	closed    bool
}

var _ Engine = (*CUDAEngine)(nil)

// cudaEnginesMade counts the engines this process made (CUDAEnginesMade).
var cudaEnginesMade atomic.Int64

// CUDAEnginesMade is how many CUDA engines this process has made: the cuda build's hicache tests
// tell by it which of them ran on the GPU, and kernels/gpu-check.sh counts only those.
func CUDAEnginesMade() int64 { return cudaEnginesMade.Load() }

// NewCUDAEngine uses GPU 0; see NewCUDAEngineOnDevice.
func NewCUDAEngine(deviceBytes int64, slabs [][]byte) (*CUDAEngine, error) {
	return NewCUDAEngineOnDevice(0, deviceBytes, slabs)
}

func newCUDAEngine(deviceBytes int64, slabs [][]byte) (Engine, error) {
	return NewCUDAEngine(deviceBytes, slabs)
}

// NewCUDAEngineOnDevice allocates deviceBytes of device memory on GPU ordinal, registers the slabs
// (which must stay mapped, and not be Go heap memory the engine could outlive, until Close), and
// loads the kernel. On error everything already acquired is released.
func NewCUDAEngineOnDevice(ordinal int, deviceBytes int64, slabs [][]byte) (*CUDAEngine, error) {
	if deviceBytes < 0 {
		return nil, fmt.Errorf("kernels: device buffer of %d bytes", deviceBytes)
	}
	if err := GPUMissing(); err != nil {
		return nil, fmt.Errorf("kernels: GPU %d: %w", ordinal, err)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("kernels: GPU %d: %w", ordinal, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("kernels: primary context of GPU %d: %w", ordinal, err)
	}
	e := &CUDAEngine{
		device:      dev,
		ctx:         ctx,
		deviceBytes: deviceBytes,
		slabs:       slabs,
		slabBytes:   slabSizes(slabs),
	}
	if err := e.withContext(e.start); err != nil {
		e.withContext(e.release)
		return nil, err
	}
	cudaEnginesMade.Add(1)
	return e, nil
}

// start acquires the device resources, in the order release frees them.
func (e *CUDAEngine) start() error {
	var err error
	// cuMemAlloc refuses 0 bytes; an empty device buffer stays a null pointer, which validation
	// never lets a copy touch.
	if e.deviceBytes > 0 {
		if e.devicePtr, err = cu.MemAlloc(e.deviceBytes); err != nil {
			return fmt.Errorf(
				"kernels: cuMemAlloc(%d bytes) for the device KV buffer: %w",
				e.deviceBytes,
				err,
			)
		}
	}
	if e.module, err = loadModule(pagecopyFatbin); err != nil {
		return err
	}
	e.hasModule = true
	if e.copyFn, err = e.module.Function("copy_items"); err != nil {
		return fmt.Errorf("kernels: copy_items in the pagecopy fatbin: %w", err)
	}
	if err := e.sizeGrid(); err != nil {
		return err
	}
	if e.stream, err = cu.MakeStream(cu.NonBlocking); err != nil {
		return fmt.Errorf("kernels: cuStreamCreate: %w", err)
	}
	if err := e.growItems(cudaItemsMin); err != nil {
		return err
	}
	return e.registerSlabs()
}

// loadModule loads a fatbin (or PTX) image with cuModuleLoadDataEx and the driver's error and info
// logs: a load that must compile PTX (a GPU the SASS is not for) and fails then says why, and which
// images it had.
func loadModule(image string) (cu.Module, error) {
	errorLog, infoLog := make([]byte, cudaJITLogBytes), make([]byte, cudaJITLogBytes)
	m, err := cu.LoadDataEx(
		image,
		&cu.JITErrorLogBuffer{Buffer: errorLog},
		&cu.JITInfoLogBuffer{Buffer: infoLog},
	)
	if err != nil {
		return m, fmt.Errorf(
			"kernels: loading the pagecopy module (%s): %w; JIT error log: %q; info log: %q",
			describeFatbin(image),
			err,
			cText(errorLog),
			cText(infoLog),
		)
	}
	return m, nil
}

// cText is the NUL-terminated text the driver wrote into buf.
func cText(buf []byte) string {
	if i := bytes.IndexByte(buf, 0); i >= 0 {
		buf = buf[:i]
	}
	return string(bytes.TrimSpace(buf))
}

// sizeGrid bounds the grid by what the GPU runs at once: SMs times the blocks of copy_items one SM
// holds (cuOccupancyMaxActiveBlocksPerMultiprocessor, which knows the kernel's registers: ptxas
// gives it 40 and a spill, so 6 blocks of 256 threads fit an sm_90 SM, not the 8 a fixed number
// assumed). More blocks would wait for a free SM; fewer would leave warps idle that could keep bus
// transactions in flight.
func (e *CUDAEngine) sizeGrid() error {
	sms, err := e.device.Attribute(cu.MultiprocessorCount)
	if err != nil {
		return fmt.Errorf("kernels: SM count: %w", err)
	}
	if e.blocksPerSM, err = e.copyFn.MaxActiveBlocksPerMultiProcessor(cudaThreadsPerBlock, 0); err != nil {
		return fmt.Errorf(
			"kernels: cuOccupancyMaxActiveBlocksPerMultiprocessor(copy_items, %d threads): %w",
			cudaThreadsPerBlock,
			err,
		)
	}
	if e.blocksPerSM < 1 {
		return fmt.Errorf(
			"kernels: copy_items with %d threads per block fits no SM (occupancy %d)",
			cudaThreadsPerBlock,
			e.blocksPerSM,
		)
	}
	e.blocksMax = sms * e.blocksPerSM
	return nil
}

// release frees whatever start acquired; it runs on a failed start too, so every step checks.
func (e *CUDAEngine) release() error {
	var errs []error
	for _, c := range e.chunks {
		if c.stage != nil {
			errs = append(errs, freePinnedBytes(c.stage))
		} else {
			errs = append(errs, unregisterHost(c.hostAddr))
		}
	}
	e.chunks = nil
	errs = append(errs, e.freeItems())
	if e.devicePtr != 0 {
		errs = append(errs, cu.MemFree(e.devicePtr))
		e.devicePtr = 0
	}
	if e.stream != (cu.Stream{}) {
		errs = append(errs, e.stream.Destroy())
	}
	// The primary context outlives the engine (another engine, or NCCL, may hold it), so the module
	// must be unloaded here or each engine would leak one.
	if e.hasModule {
		errs = append(errs, e.module.Unload())
		e.hasModule = false
	}
	errs = append(errs, e.device.ReleasePrimaryCtx())
	return errors.Join(errs...)
}

// withContext runs f on this goroutine's OS thread, locked, with the engine's context current: CUDA
// contexts are per thread, and Go moves goroutines between threads.
func (e *CUDAEngine) withContext(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(e.ctx); err != nil {
		return fmt.Errorf("kernels: cuCtxSetCurrent: %w", err)
	}
	return f()
}

// Name returns "cuda".
func (e *CUDAEngine) Name() string { return KindCUDA }

// DeviceBytes returns the size of the device KV buffer.
func (e *CUDAEngine) DeviceBytes() int64 { return e.deviceBytes }

// Gather copies device -> slab for every span (D2H, the backup direction).
func (e *CUDAEngine) Gather(spans []Span) error { return e.run(spans, true) }

// Scatter copies slab -> device for every span (H2D, the load-back direction).
func (e *CUDAEngine) Scatter(spans []Span) error { return e.run(spans, false) }

// WriteDevice copies src into the device buffer at offsetBytes and returns once the bytes are
// there.
//
// The copy runs on the engine's stream and the stream is synchronised: a plain cuMemcpyHtoD from
// pageable memory may return before its DMA lands, on the legacy default stream, which the engine's
// non-blocking stream does not wait for, so a Gather right after it (hicache writes a page's
// content, then backs it up) could read the old bytes.
func (e *CUDAEngine) WriteDevice(offsetBytes int64, src []byte) error {
	if err := checkStaging("WriteDevice", offsetBytes, len(src), e.deviceBytes); err != nil ||
		len(src) == 0 {
		return err
	}
	return e.locked(func() error {
		err := cu.MemcpyHtoDAsync(
			e.devicePtr+cu.DevicePtr(offsetBytes),
			unsafe.Pointer(&src[0]),
			int64(len(src)),
			e.stream,
		)
		return e.syncStaging("WriteDevice", err)
	})
}

// ReadDevice copies the device buffer at offsetBytes into dst, on the engine's stream (so after
// every copy enqueued before it), and returns once dst holds the bytes.
func (e *CUDAEngine) ReadDevice(offsetBytes int64, dst []byte) error {
	if err := checkStaging("ReadDevice", offsetBytes, len(dst), e.deviceBytes); err != nil ||
		len(dst) == 0 {
		return err
	}
	return e.locked(func() error {
		err := cu.MemcpyDtoHAsync(
			unsafe.Pointer(&dst[0]),
			e.devicePtr+cu.DevicePtr(offsetBytes),
			int64(len(dst)),
			e.stream,
		)
		return e.syncStaging("ReadDevice", err)
	})
}

// syncStaging waits for a staging copy enqueued on the engine's stream.
func (e *CUDAEngine) syncStaging(op string, err error) error {
	if err != nil {
		return fmt.Errorf("kernels: %s: %w", op, err)
	}
	if err := e.stream.Synchronize(); err != nil {
		return fmt.Errorf("kernels: %s: %w", op, err)
	}
	return nil
}

// Close unregisters the slabs and frees the device memory. A second Close is a no-op.
func (e *CUDAEngine) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	return e.withContext(e.release)
}

// locked runs f under the engine's mutex, with its context current, unless the engine is closed.
func (e *CUDAEngine) locked(f func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return errors.New("kernels: engine is closed")
	}
	return e.withContext(f)
}
