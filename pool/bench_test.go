package pool

import (
	"fmt"
	"testing"
)

// benchGeometry has slabs of 2^20 slots, so the larger pools have several slabs.
func benchGeometry(slots int) Geometry {
	return Geometry{
		CPSize:           8,
		Layers:           1,
		PayloadsPerLayer: 2,
		PageTokens:       1,
		TokenBytes:       1,
		Slots:            slots,
		SlabBytesMax:     16 << 20,
	}
}

// newHalfFullAllocator fills the lower half of the pool with committed 64-page objects, so that
// each benchmark reservation has to find the free half through the summary levels and the object
// table and LRU are populated.
func newHalfFullAllocator(b *testing.B, slots int) *Allocator {
	a, err := New(benchGeometry(slots))
	if err != nil {
		b.Fatal(err)
	}
	const fillPages = 64
	for id := ObjectID(1 << 40); a.FreeSlots()-fillPages >= slots/2; id++ {
		if _, err := a.Reserve(id, fillPages, 0, 0); err != nil {
			b.Fatal(err)
		}
		if err := a.MarkObjectCommitted(id); err != nil {
			b.Fatal(err)
		}
	}
	return a
}

// BenchmarkReserveCommitRelease measures one object's life on the hot path; the cost must not grow
// with the pool (compare 2^24 with 2^14) and must not allocate.
func BenchmarkReserveCommitRelease(b *testing.B) {
	for _, slotsLog2 := range []int{14, 20, 24} {
		a := newHalfFullAllocator(b, 1<<slotsLog2)
		for _, pages := range []int{1, 16, 256} {
			b.Run(fmt.Sprintf("slots=2^%d/pages=%d", slotsLog2, pages), func(b *testing.B) {
				b.ReportAllocs()
				for i := 0; b.Loop(); i++ {
					id := ObjectID(i)
					if outcome, err := a.Reserve(id, pages, uint64(i), uint64(i)); err != nil ||
						outcome != Reserved {
						b.Fatalf("reserve: %v %v", outcome, err)
					}
					if err := a.MarkObjectCommitted(id); err != nil {
						b.Fatal(err)
					}
					if err := a.Release(id); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkNew measures start-up: it must not take seconds at 2^24 slots.
func BenchmarkNew(b *testing.B) {
	for _, slotsLog2 := range []int{14, 20, 24} {
		b.Run(fmt.Sprintf("slots=2^%d", slotsLog2), func(b *testing.B) {
			var a *Allocator
			for b.Loop() {
				var err error
				if a, err = New(benchGeometry(1 << slotsLog2)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(a.TableBytes())/(1<<20), "table-MiB")
		})
	}
}

// BenchmarkReserveWithEviction keeps the pool full of committed 16-page objects, so every
// reservation evicts the least recently used one: eviction must cost O(log objects), not O(pool).
func BenchmarkReserveWithEviction(b *testing.B) {
	const pages = 16
	for _, slotsLog2 := range []int{14, 20, 24} {
		a, err := New(benchGeometry(1 << slotsLog2))
		if err != nil {
			b.Fatal(err)
		}
		var id ObjectID
		for ; a.FreeSlots() >= pages; id++ {
			a.Reserve(id, pages, uint64(id), uint64(id))
			a.MarkObjectCommitted(id)
		}
		b.Run(fmt.Sprintf("slots=2^%d/pages=%d", slotsLog2, pages), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if outcome, err := a.Reserve(id, pages, uint64(id), uint64(id)); err != nil ||
					outcome != ReservedAfterEviction {
					b.Fatalf("reserve: %v %v", outcome, err)
				}
				a.MarkObjectCommitted(id)
				id++
			}
		})
	}
}
