package pool

import (
	"syscall"
	"unsafe"
)

// adviseHugePages asks the kernel to back s with transparent huge pages (MADV_HUGEPAGE; honoured
// where THP is "always" or "madvise", ignored where it is "never"). The large tables are probed at
// random positions (the object table's buckets) or at the slot being placed, so at 2^22 slots and
// more nearly every op missed the TLB with 4 KiB pages. The tables are fresh from New and not yet
// touched, so their first touches fault in huge pages directly. An error only means no huge pages,
// so it is ignored.
func adviseHugePages[T any](s []T) {
	var zero T
	size := uintptr(cap(s)) * unsafe.Sizeof(zero)
	if size < hugePageMinBytes {
		return
	}
	const page = 4096 // madvise wants a page-aligned start
	data := unsafe.Pointer(unsafe.SliceData(s))
	start := uintptr(data)
	first, last := (start+page-1)&^(page-1)-start, (start+size)&^(page-1)-start
	_ = syscall.Madvise(unsafe.Slice((*byte)(data), size)[first:last], syscall.MADV_HUGEPAGE)
}
