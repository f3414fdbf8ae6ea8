package pool

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/internal/errscope"
)

// layoutGeometries include a single slab, several slabs with a smaller last one, and K/V and MLA.
func layoutGeometries() []Geometry {
	var out []Geometry
	for _, layout := range []Layout{LayerFirst, PageFirst} {
		out = append(
			out,
			Geometry{
				CPSize:           2,
				Layers:           3,
				PayloadsPerLayer: 2,
				PageTokens:       2,
				TokenBytes:       3,
				Slots:            5,
				SlabBytesMax:     1 << 20,
				Layout:           layout,
			},
			Geometry{
				CPSize:           3,
				Layers:           2,
				PayloadsPerLayer: 1,
				PageTokens:       1,
				TokenBytes:       4,
				Slots:            11,
				SlabBytesMax:     24*4 + 5,
				Layout:           layout,
			},
			Geometry{
				CPSize:           8,
				Layers:           2,
				PayloadsPerLayer: 2,
				PageTokens:       4,
				TokenBytes:       2,
				Slots:            7,
				SlabBytesMax:     256 * 3,
				Layout:           layout,
			},
			Geometry{
				CPSize:           1,
				Layers:           1,
				PayloadsPerLayer: 1,
				PageTokens:       1,
				TokenBytes:       1,
				Slots:            3,
				SlabBytesMax:     1,
				Layout:           layout,
			},
			// Groups over 2 and 4 nodes: each node's slabs hold its 4 or 2 ranks' parts.
			Geometry{
				CPSize:           8,
				Nodes:            2,
				Layers:           2,
				PayloadsPerLayer: 2,
				PageTokens:       4,
				TokenBytes:       2,
				Slots:            7,
				SlabBytesMax:     128 * 3,
				Layout:           layout,
			},
			Geometry{
				CPSize:           8,
				Nodes:            4,
				Layers:           1,
				PayloadsPerLayer: 2,
				PageTokens:       1,
				TokenBytes:       3,
				Slots:            9,
				SlabBytesMax:     12 * 4,
				Layout:           layout,
			},
		)
	}
	return out
}

func TestLayoutEveryByteBelongsToExactlyOnePart(t *testing.T) {
	for _, g := range layoutGeometries() {
		if err := g.Validate(); err != nil {
			t.Fatalf("%+v: %v", g, err)
		}
		slots := 0
		for slab := range g.SlabCount() {
			slots += g.SlabSlots(slab)
			if slab < g.SlabCount()-1 && g.SlabSlots(slab) != g.SlotsPerSlab() {
				t.Fatalf("%+v: slab %d of %d is short", g, slab, g.SlabCount())
			}
			if g.SlabBytes(slab) > g.SlabBytesMax {
				t.Fatalf(
					"%+v: slab %d has %d bytes, bound %d",
					g,
					slab,
					g.SlabBytes(slab),
					g.SlabBytesMax,
				)
			}
			checkSlabCoverage(t, g, slab)
		}
		if slots != g.Slots {
			t.Fatalf("%+v: slabs hold %d slots, want %d", g, slots, g.Slots)
		}
	}
}

// checkSlabCoverage marks the bytes of every part of one slab and checks that each byte is marked
// once.
func checkSlabCoverage(t *testing.T, g Geometry, slab int) {
	t.Helper()
	owners := make([]int, g.SlabBytes(slab))
	part := 0
	for slot := range g.SlabSlots(slab) {
		for rank := range g.NodeParts() {
			for layer := range g.Layers {
				for payload := range g.PayloadsPerLayer {
					part++
					base := g.PartOffset(slab, slot, rank, layer, payload)
					if got := g.PartMap().Offset(slab, slot, rank, layer, payload); got != base {
						t.Fatalf(
							"%+v slab %d: part (%d,%d,%d,%d): PartMap says %d, PartOffset %d",
							g,
							slab,
							slot,
							rank,
							layer,
							payload,
							got,
							base,
						)
					}
					if base < 0 || base+g.PartBytes() > int64(len(owners)) {
						t.Fatalf(
							"%+v slab %d: part (%d,%d,%d,%d) at [%d, %d) outside the slab of %d bytes",
							g,
							slab,
							slot,
							rank,
							layer,
							payload,
							base,
							base+g.PartBytes(),
							len(owners),
						)
					}
					for b := base; b < base+g.PartBytes(); b++ {
						if owners[b] != 0 {
							t.Fatalf(
								"%+v slab %d: byte %d belongs to parts %d and %d",
								g,
								slab,
								b,
								owners[b],
								part,
							)
						}
						owners[b] = part
					}
				}
			}
		}
	}
	for b, owner := range owners {
		if owner == 0 {
			t.Fatalf("%+v slab %d: byte %d belongs to no part", g, slab, b)
		}
	}
}

func TestLayerFirstKeepsConsecutiveSlotsContiguous(t *testing.T) {
	g := Geometry{
		CPSize:           2,
		Layers:           2,
		PayloadsPerLayer: 2,
		PageTokens:       4,
		TokenBytes:       2,
		Slots:            10,
		SlabBytesMax:     1 << 20,
	}
	for slot := 1; slot < g.Slots; slot++ {
		if got := g.PartOffset(0, slot, 1, 1, 1) - g.PartOffset(0, slot-1, 1, 1, 1); got != g.PartBytes() {
			t.Fatalf(
				"slot %d starts %d bytes after slot %d, want %d",
				slot,
				got,
				slot-1,
				g.PartBytes(),
			)
		}
	}
	g.Layout = PageFirst
	if got := g.PartOffset(0, 1, 0, 0, 0) - g.PartOffset(0, 0, 0, 0, 0); got != g.SlotBytes() {
		t.Fatalf("page_first: slot stride %d, want slot bytes %d", got, g.SlotBytes())
	}
}

// TestNodeSlabIsOneKthOfTheGroupsSlab: a group over k nodes keeps the slot numbers and slab
// division of the group, while each node's slabs are 1/k of a one-node group's bytes for the same
// slots; the allocators of different node counts never share a digest, and a group of one node
// keeps the digest it always had.
func TestNodeSlabIsOneKthOfTheGroupsSlab(t *testing.T) {
	one := Geometry{
		CPSize:           8,
		Layers:           2,
		PayloadsPerLayer: 2,
		PageTokens:       4,
		TokenBytes:       2,
		Slots:            10,
		SlabBytesMax:     1 << 20,
	}
	for _, k := range []int{2, 4, 8} {
		g := one
		g.Nodes = k
		g.SlabBytesMax = one.SlabBytesMax / int64(k)
		if err := g.Validate(); err != nil {
			t.Fatal(err)
		}
		if g.NodeParts() != 8/k || g.TotalBytes()*int64(k) != one.TotalBytes() ||
			g.GroupSlotBytes() != one.SlotBytes() ||
			g.SlabCount() != one.SlabCount() ||
			g.SlotsPerSlab() != one.SlotsPerSlab() {
			t.Errorf(
				"k %d: %d parts, %d bytes a node (one node: %d), %d slabs of %d slots (one node: %d of %d)",
				k,
				g.NodeParts(),
				g.TotalBytes(),
				one.TotalBytes(),
				g.SlabCount(),
				g.SlotsPerSlab(),
				one.SlabCount(),
				one.SlotsPerSlab(),
			)
		}
		if geometrySeed(g) == geometrySeed(one) {
			t.Errorf("k %d: same digest seed as one node", k)
		}
	}
	named := one
	named.Nodes = 1
	if geometrySeed(named) != geometrySeed(one) {
		t.Errorf("Nodes 1 and 0 differ in digest seed")
	}
	bad := one
	bad.Nodes = 3
	var ce *errscope.ConfigError
	if err := bad.Validate(); !errors.As(err, &ce) || ce.Flag != "cp" {
		t.Errorf("3 nodes for 8 ranks: %v, want a ConfigError naming --cp", err)
	}
}

func TestParseLayout(t *testing.T) {
	for _, l := range []Layout{LayerFirst, PageFirst} {
		if got, err := ParseLayout(l.String()); err != nil || got != l {
			t.Fatalf("ParseLayout(%q) = %v, %v", l.String(), got, err)
		}
	}
	_, err := ParseLayout("slot_first")
	if err == nil || !strings.Contains(err.Error(), "layer_first") ||
		!strings.Contains(err.Error(), "page_first") {
		t.Fatalf("ParseLayout(bad) error %v must list the allowed values", err)
	}
}

func TestValidateNamesTheFlag(t *testing.T) {
	good := Geometry{
		CPSize:           8,
		Layers:           4,
		PayloadsPerLayer: 2,
		PageTokens:       16,
		TokenBytes:       256,
		Slots:            100,
		SlabBytesMax:     1 << 30,
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		flag   string
		mutate func(*Geometry)
	}{
		{"cp", func(g *Geometry) { g.CPSize = 0 }},
		{"layers", func(g *Geometry) { g.Layers = -1 }},
		{"payloads", func(g *Geometry) { g.PayloadsPerLayer = 0 }},
		{"page-tokens", func(g *Geometry) { g.PageTokens = 0 }},
		{"token-bytes", func(g *Geometry) { g.TokenBytes = 0 }},
		{"l2-slots", func(g *Geometry) { g.Slots = 0 }},
		{"l2-slots", func(g *Geometry) { g.Slots = slotsMax + 1 }},
		{"slab-bytes-max", func(g *Geometry) { g.SlabBytesMax = g.SlotBytes() - 1 }},
		{"layout", func(g *Geometry) { g.Layout = 7 }},
		{"l2-slots", func(g *Geometry) { g.MaxObjects = g.Slots + 1 }},
		{"page-tokens", func(g *Geometry) { g.PageTokens, g.TokenBytes = math.MaxInt64/2, 3 }},
		{"token-bytes", func(g *Geometry) { g.TokenBytes = math.MaxInt64 / 64 }},
		{"layers", func(g *Geometry) { g.Layers = math.MaxInt64 / 64 }},
		{"l2-slots", func(g *Geometry) { g.TokenBytes, g.Slots = 1<<40, 1<<20 }},
	}
	for _, c := range cases {
		g := good
		c.mutate(&g)
		err := g.Validate()
		var ce *errscope.ConfigError
		if !errors.As(err, &ce) || ce.Flag != c.flag ||
			!strings.HasPrefix(err.Error(), "invalid --"+c.flag+": ") {
			t.Errorf(
				"--%s: Validate() = %v, want a *errscope.ConfigError naming --%s",
				c.flag,
				err,
				c.flag,
			)
		}
		if _, err := New(g); err == nil {
			t.Errorf("--%s: New accepted an invalid geometry", c.flag)
		}
	}
}
