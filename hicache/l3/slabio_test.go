package l3

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/pool"
)

// TestSlabIOMatchesThePartByPartModel: GatherFromSlab and ScatterIntoSlab (which copy a run of
// consecutive slots at a time) move every part where a copy part by part would, for both layouts,
// slots in runs and scattered, over two slabs; on a group over one node (every rank's parts) and on
// one node of a group over two (the node's).
func TestSlabIOMatchesThePartByPartModel(t *testing.T) {
	for i, layout := range []pool.Layout{pool.LayerFirst, pool.PageFirst, pool.LayerFirst, pool.PageFirst} {
		g := pool.Geometry{
			CPSize:           3,
			Layers:           2,
			PayloadsPerLayer: 2,
			PageTokens:       2,
			TokenBytes:       8,
			Slots:            24,
			Layout:           layout,
		}
		if i >= 2 {
			g.CPSize, g.Nodes = 4, 2
		}
		g.SlabBytesMax = int64(g.Slots/2) * g.SlotBytes()
		ns := Namespace{
			Layers:     g.Layers,
			Payloads:   g.PayloadsPerLayer,
			PageTokens: g.PageTokens,
			TokenBytes: g.TokenBytes,
			CPSize:     g.CPSize,
			Nodes:      g.Nodes,
			Name:       "t",
		}
		s := &Store{ns: ns}
		rng := rand.New(rand.NewPCG(uint64(i), 1))
		for trial := range 50 {
			mem := make([][]byte, g.SlabCount())
			for i := range mem {
				mem[i] = make([]byte, g.SlabBytes(i))
				for j := range mem[i] {
					mem[i][j] = byte(rng.IntN(256))
				}
			}
			sl := Slabs{Geometry: g, Mem: mem}
			var pages []l3block.PageSlot
			for slot := rng.IntN(4); slot < g.Slots && len(pages) < 9; slot += 1 + rng.IntN(2)*rng.IntN(3) {
				pages = append(
					pages,
					l3block.PageSlot{
						Slab: int32(slot / g.SlotsPerSlab()),
						Slot: int32(slot % g.SlotsPerSlab()),
					},
				)
			}
			want := make([]byte, ns.PayloadBytes(len(pages)*g.PageTokens))
			pb := g.PartBytes()
			for rank := range g.NodeParts() {
				for layer := range g.Layers {
					for payload := range g.PayloadsPerLayer {
						base := ns.PartOffset(len(pages)*g.PageTokens, rank, layer, payload)
						for i, p := range pages {
							off := g.PartOffset(int(p.Slab), int(p.Slot), rank, layer, payload)
							copy(want[base+int64(i)*pb:], mem[p.Slab][off:off+pb])
						}
					}
				}
			}
			var buf []byte
			got, err := s.GatherFromSlab(pages, sl, &buf)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf(
					"%v trial %d: gather of %v differs from part by part (%v)",
					layout,
					trial,
					pages,
					err,
				)
			}
			for i := range mem {
				clear(mem[i])
			}
			if err := s.ScatterIntoSlab(want, pages, sl); err != nil {
				t.Fatal(err)
			}
			if back, _ := s.GatherFromSlab(pages, sl, &buf); !bytes.Equal(back, want) {
				t.Fatalf("%v trial %d: scatter then gather of %v lost bytes", layout, trial, pages)
			}
		}
	}
}
