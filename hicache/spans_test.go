package hicache

import (
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// TestARunOfPagesIsOneCopyPerLayerAndPayload: a copy of consecutive device pages into consecutive slots of a
// layer_first slab is, after the kernels coalesce its spans, one span per layer and payload, and a break in
// either the pages or the slots cuts the run there and nowhere else. Built page by page with the payloads
// interleaved, the spans never coalesced: a replay copied every part, a few hundred bytes, on its own.
func TestARunOfPagesIsOneCopyPerLayerAndPayload(t *testing.T) {
	g := pool.Geometry{CPSize: 2, Layers: 3, PayloadsPerLayer: 2, PageTokens: 4, TokenBytes: 8, Slots: 64, SlabBytesMax: 1 << 20}
	rs := &runState{job: &spmd.Job{Topo: &spmd.Topology{NodePart: 1}}, opts: &Options{DevicePages: 32}, geometry: g,
		parts: g.PartMap(), partBytes: g.PartBytes()}
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
					t.Fatalf("layer %d: %d spans coalesce into %d copies, want %d: %v", layer, len(s), len(merged), want, merged)
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
