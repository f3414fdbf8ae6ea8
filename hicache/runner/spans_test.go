package runner

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// TestARunOfPagesIsOneCopyPerLayerAndPayload: a copy of consecutive device pages into consecutive
// slots of a layer_first slab is, after the kernels coalesce its spans, one span per layer and
// payload, and a break in either the pages or the slots cuts the run there and nowhere else. Built
// page by page with the payloads interleaved, the spans never coalesced: a replay copied every
// part, a few hundred bytes, on its own.
func TestARunOfPagesIsOneCopyPerLayerAndPayload(t *testing.T) {
	g := pool.Geometry{
		CPSize:           2,
		Layers:           3,
		PayloadsPerLayer: 2,
		PageTokens:       4,
		TokenBytes:       8,
		Slots:            64,
		SlabBytesMax:     1 << 20,
	}
	rs := &runState{
		job:       &spmd.Job{Topo: &spmd.Topology{NodePart: 1}},
		opts:      &config.Options{DevicePages: 32},
		geometry:  g,
		parts:     g.PartMap(),
		partBytes: g.PartBytes(),
	}
	slots := func(first ...int32) []cache.SlabSlot {
		var out []cache.SlabSlot
		for _, s := range first {
			out = append(out, cache.SlabSlot{Slab: 0, Slot: s})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		pages []int32
		slots []cache.SlabSlot
		runs  int // per layer and payload
	}{
		{"one run", []int32{4, 5, 6, 7, 8}, slots(10, 11, 12, 13, 14), 1},
		{"a break in the pages", []int32{4, 5, 9, 10, 11}, slots(10, 11, 12, 13, 14), 2},
		{"a break in the slots", []int32{4, 5, 6, 7, 8}, slots(10, 11, 12, 20, 21), 2},
		{"descending pages", []int32{8, 7, 6}, slots(10, 11, 12), 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spans := rs.spansFor(&cache.Copy{DevicePages: tc.pages, Slots: tc.slots})
			for layer, s := range spans {
				merged := kernels.Coalesce(append([]kernels.Span(nil), s...))
				if want := tc.runs * g.PayloadsPerLayer; len(merged) != want {
					t.Fatalf(
						"layer %d: %d spans coalesce into %d copies, want %d: %v",
						layer,
						len(s),
						len(merged),
						want,
						merged,
					)
				}
				var bytes int64
				for _, m := range merged {
					bytes += m.Bytes
				}
				if want := int64(len(tc.pages)*g.PayloadsPerLayer) * g.PartBytes(); bytes != want {
					t.Fatalf("layer %d: the copies move %d bytes, want %d", layer, bytes, want)
				}
			}
		})
	}
}

// TestAuditFindsAWrongByteInEveryPartInBothLayouts: the commit audit reads the slab in the order of
// its layout; in either, a correct object passes and one wrong byte in any part of any page fails
// it.
func TestAuditFindsAWrongByteInEveryPartInBothLayouts(t *testing.T) {
	for _, layout := range []pool.Layout{pool.LayerFirst, pool.PageFirst} {
		g := pool.Geometry{
			CPSize:           2,
			Layers:           2,
			PayloadsPerLayer: 2,
			PageTokens:       4,
			TokenBytes:       8,
			Slots:            16,
			SlabBytesMax:     1 << 20,
			Layout:           layout,
		}
		slabs := [][]byte{make([]byte, g.SlabBytes(0))}
		rs := &runState{
			job:       &spmd.Job{Topo: &spmd.Topology{NodePartRanks: []int{0, 1}}},
			opts:      &config.Options{Seed: 9},
			geometry:  g,
			parts:     g.PartMap(),
			partBytes: g.PartBytes(),
			slab:      &shm.SharedSlab{Slabs: slabs},
		}
		a := &cache.Audit{
			Slots:    []cache.SlabSlot{{Slot: 5}, {Slot: 6}, {Slot: 7}},
			StartPos: 8,
			Parts:    2,
		}
		for i := range len(a.Slots) * g.PageTokens {
			a.Tokens = append(a.Tokens, int32(100+3*i))
		}
		var offsets []int64
		for page, s := range a.Slots {
			for part := range 2 {
				for layer := range g.Layers {
					for payload := range g.PayloadsPerLayer {
						off := g.PartOffset(0, int(s.Slot), part, layer, payload)
						cache.FillPart(
							slabs[0][off:off+g.PartBytes()],
							a.Tokens[page*g.PageTokens:(page+1)*g.PageTokens],
							a.StartPos+page*g.PageTokens,
							g.TokenBytes,
							rs.contentKey(part, layer, payload),
						)
						offsets = append(offsets, off)
					}
				}
			}
		}
		if !rs.Audit(a) {
			t.Fatalf("%v: the audit fails a correct object", layout)
		}
		for _, off := range offsets {
			at := off + g.PartBytes() - 1
			slabs[0][at] ^= 0x40
			if rs.Audit(a) {
				t.Fatalf(
					"%v: the audit passes an object with a wrong byte at slab offset %d",
					layout,
					at,
				)
			}
			slabs[0][at] ^= 0x40
		}
	}
}
