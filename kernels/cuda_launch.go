//go:build cuda

package kernels

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The CUDA engine's launches: a span list becomes copy items in pinned host memory, launched as one kernel a
// batch, the items' buffer grown as a batch needs it.

// run validates and coalesces the spans, builds the items, uploads them and runs the kernel to
// completion.
func (e *CUDAEngine) run(spans []Span, gather bool) error {
	return e.locked(func() error {
		if _, err := validateSpans(spans, e.deviceBytes, e.slabBytes); err != nil {
			return err
		}
		e.spans = Coalesce(append(e.spans[:0], spans...))
		e.items = e.items[:0]
		for _, s := range e.spans {
			e.appendItems(s, gather)
		}
		if len(e.items) == 0 {
			return nil
		}
		if e.staged && !gather {
			e.stageSpans(true)
		}
		if err := e.launch(); err != nil {
			return err
		}
		if e.staged && gather {
			e.stageSpans(false)
		}
		return nil
	})
}

// appendItems appends the items of one span (appendSpanItems).
func (e *CUDAEngine) appendItems(s Span, gather bool) {
	host := sliceAddr(e.slabs[s.Slab]) + uintptr(s.SlabOffsetBytes)
	device := uintptr(e.devicePtr) + uintptr(s.DeviceOffsetBytes)
	e.items = appendSpanItems(e.items, e.chunks, host, device, s.Bytes, gather)
}

// launch uploads the items and runs copy_items on the engine's stream until it completes.
//
// The upload is on the engine's stream, from pinned staging, so the kernel that follows it on that
// stream reads this call's items: a plain cuMemcpyHtoD runs on the legacy default stream, which the
// engine's non-blocking stream does not wait for, and from pageable memory it may return before its
// DMA lands. The staging is rewritten only by the next call, after this one synchronised the
// stream.
func (e *CUDAEngine) launch() error {
	if len(e.items) > e.itemsCap {
		if err := e.growItems(max(len(e.items), 2*e.itemsCap)); err != nil {
			return err
		}
	}
	copy(e.itemsHost, e.items)
	itemBytes := int64(len(e.items)) * int64(unsafe.Sizeof(cudaItem{}))
	if err := cu.MemcpyHtoDAsync(e.itemsPtr, unsafe.Pointer(&e.itemsHost[0]), itemBytes, e.stream); err != nil {
		return fmt.Errorf("kernels: uploading %d copy items: %w", len(e.items), err)
	}
	warpsPerBlock := cudaThreadsPerBlock / 32
	blocks := min((len(e.items)+warpsPerBlock-1)/warpsPerBlock, e.blocksMax)
	itemsPtr, count := uint64(e.itemsPtr), uint64(len(e.items))
	params := []unsafe.Pointer{unsafe.Pointer(&itemsPtr), unsafe.Pointer(&count)}
	if err := e.copyFn.Launch(blocks, 1, 1, cudaThreadsPerBlock, 1, 1, 0, e.stream, params); err != nil {
		return fmt.Errorf(
			"kernels: launching copy_items (%d items, %d blocks): %w",
			len(e.items),
			blocks,
			err,
		)
	}
	if err := e.stream.Synchronize(); err != nil {
		return fmt.Errorf("kernels: copy_items (%d items): %w", len(e.items), err)
	}
	return nil
}

// growItems replaces the device item buffer and its pinned staging with ones of capacity items.
func (e *CUDAEngine) growItems(capacity int) error {
	if err := e.freeItems(); err != nil {
		return err
	}
	itemBytes := capacity * int(unsafe.Sizeof(cudaItem{}))
	host, err := allocPinnedBytes(itemBytes)
	if err != nil {
		return fmt.Errorf("kernels: staging for %d copy items: %w", capacity, err)
	}
	e.itemsHost = unsafe.Slice((*cudaItem)(unsafe.Pointer(&host[0])), capacity)
	if e.itemsPtr, err = cu.MemAlloc(int64(itemBytes)); err != nil {
		return fmt.Errorf("kernels: cuMemAlloc for %d copy items: %w", capacity, err)
	}
	e.itemsCap = capacity
	return nil
}

// freeItems frees the item buffer and its staging, whichever exist.
func (e *CUDAEngine) freeItems() error {
	var errs []error
	if e.itemsPtr != 0 {
		errs = append(errs, cu.MemFree(e.itemsPtr))
		e.itemsPtr = 0
	}
	if e.itemsHost != nil {
		errs = append(
			errs,
			freePinnedBytes(
				unsafe.Slice(
					(*byte)(unsafe.Pointer(&e.itemsHost[0])),
					len(e.itemsHost)*int(unsafe.Sizeof(cudaItem{})),
				),
			),
		)
		e.itemsHost = nil
	}
	e.itemsCap = 0
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("kernels: freeing the item buffers: %w", err)
	}
	return nil
}
