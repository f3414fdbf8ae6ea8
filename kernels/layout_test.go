package kernels

import (
	"fmt"
	"math/rand/v2"
)

// testGeometry models, in miniature, the layouts hicache builds span lists for: the device KV
// buffer is [layer][payload][page] parts of partBytes, and the slabs are layer_first (per slab, a
// region per (rank, layer, payload), slot-major) or page_first (per slot: rank x layer x payload
// parts).
type testGeometry struct {
	ranks, layers, payloads int
	devicePages             int // pages per (layer, payload) on the device
	slotsPerSlab            int
	slabs                   int
	partBytes               int64
	pageFirst               bool
}

func (g testGeometry) String() string {
	layout := "layer_first"
	if g.pageFirst {
		layout = "page_first"
	}
	return fmt.Sprintf(
		"%s/part=%dB/layers=%d/payloads=%d/slabs=%d",
		layout,
		g.partBytes,
		g.layers,
		g.payloads,
		g.slabs,
	)
}

func (g testGeometry) deviceBytes() int64 {
	return int64(g.layers*g.payloads*g.devicePages) * g.partBytes
}

func (g testGeometry) slabBytes() int64 {
	return int64(g.slotsPerSlab*g.ranks*g.layers*g.payloads) * g.partBytes
}

func (g testGeometry) deviceOffset(layer, payload, page int) int64 {
	return int64((layer*g.payloads+payload)*g.devicePages+page) * g.partBytes
}

func (g testGeometry) slabOffset(slot, rank, layer, payload int) int64 {
	part := (rank*g.layers+layer)*g.payloads + payload
	if g.pageFirst {
		return int64(slot*g.ranks*g.layers*g.payloads+part) * g.partBytes
	}
	return int64(part*g.slotsPerSlab+slot) * g.partBytes
}

// placement puts device page page at slot slot of slab slab.
type placement struct {
	page, slab, slot int
}

// spansFor builds the span list hicache would for one rank and a list of placements, in its order:
// layer, payload, then placement.
func (g testGeometry) spansFor(rank int, places []placement) []Span {
	spans := make([]Span, 0, g.layers*g.payloads*len(places))
	for layer := range g.layers {
		for payload := range g.payloads {
			for _, p := range places {
				spans = append(spans, Span{
					DeviceOffsetBytes: g.deviceOffset(layer, payload, p.page),
					Slab:              int32(p.slab),
					SlabOffsetBytes:   g.slabOffset(p.slot, rank, layer, payload),
					Bytes:             g.partBytes,
				})
			}
		}
	}
	return spans
}

// objectPlacements places pages consecutive device pages starting at firstPage onto consecutive
// slots, as the allocator does for one object, moving to the next slab when one is full: runs of
// pages, with breaks.
func (g testGeometry) objectPlacements(firstPage, pages, slab, slot int) []placement {
	places := make([]placement, 0, pages)
	for i := range pages {
		if slot == g.slotsPerSlab {
			slab, slot = (slab+1)%g.slabs, 0
		}
		places = append(places, placement{page: firstPage + i, slab: slab, slot: slot})
		slot++
	}
	return places
}

// randomPlacements places n distinct device pages on n distinct random slots: destinations never
// overlap.
func (g testGeometry) randomPlacements(rng *rand.Rand, n int) []placement {
	pages := rng.Perm(g.devicePages)[:n]
	slots := rng.Perm(g.slabs * g.slotsPerSlab)[:n]
	places := make([]placement, n)
	for i := range places {
		places[i] = placement{
			page: pages[i],
			slab: slots[i] / g.slotsPerSlab,
			slot: slots[i] % g.slotsPerSlab,
		}
	}
	return places
}

// newSlabs allocates the slabs of g, each filled with fill.
func (g testGeometry) newSlabs(fill byte) [][]byte {
	slabs := make([][]byte, g.slabs)
	for i := range slabs {
		slabs[i] = make([]byte, g.slabBytes())
		for j := 0; fill != 0 && j < len(slabs[i]); j++ {
			slabs[i][j] = fill
		}
	}
	return slabs
}

// modelCopy is the reference: span by span, byte by byte.
func modelCopy(device []byte, slabs [][]byte, spans []Span, gather bool) {
	for _, s := range spans {
		for k := range s.Bytes {
			d, l := s.DeviceOffsetBytes+k, s.SlabOffsetBytes+k
			if gather {
				slabs[s.Slab][l] = device[d]
			} else {
				device[d] = slabs[s.Slab][l]
			}
		}
	}
}

func randomBytes(rng *rand.Rand, n int64) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}
