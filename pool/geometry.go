package pool

import (
	"fmt"
	"math"

	"github.com/cphicache/cphicache/internal/errscope"
)

// Layout says how the parts of the slots of one slab are arranged in its bytes.
type Layout uint8

const (
	// LayerFirst gives every (rank, layer, payload) one region per slab, slot-major inside it, so
	// the consecutive slots of one object's extent are one contiguous byte range per part (copies
	// coalesce).
	LayerFirst Layout = iota
	// PageFirst keeps one slot's parts together: per slot, rank x layer x payload parts.
	PageFirst
)

var layoutNames = [...]string{LayerFirst: "layer_first", PageFirst: "page_first"}

// String returns the flag spelling of the layout.
func (l Layout) String() string {
	if int(l) < len(layoutNames) {
		return layoutNames[l]
	}
	return fmt.Sprintf("Layout(%d)", uint8(l))
}

// ParseLayout parses the flag spelling of a layout.
func ParseLayout(s string) (Layout, error) {
	for i, name := range layoutNames {
		if s == name {
			return Layout(i), nil
		}
	}
	return 0, fmt.Errorf(
		"unknown layout %q: allowed values are %q and %q",
		s,
		layoutNames[LayerFirst],
		layoutNames[PageFirst],
	)
}

// slotsMax bounds Slots so that every slot index, and every index+1 used as a "none is 0" link,
// fits in a uint32 of the replicated tables.
const slotsMax = 1<<31 - 1

// Geometry of one CP group's shared L2. A slot holds one page for every (rank, layer, payload); a
// part is one (slot, rank, layer, payload) and holds PageTokens*TokenBytes bytes. A group over
// Nodes nodes keeps one slab set per node, holding the parts of that node's NodeParts ranks only:
// the slots, their numbers and every decision are the group's, the bytes each node's. The byte
// functions below (SlotBytes, SlabBytes, TotalBytes, PartOffset) are one node's.
type Geometry struct {
	CPSize int // ranks in the CP group
	// nodes the group spans, each holding CPSize/Nodes of its ranks; 0 means 1
	Nodes            int
	Layers           int   // model layers
	PayloadsPerLayer int   // 2 = K and V, 1 = MLA latent
	PageTokens       int   // tokens per page
	TokenBytes       int   // bytes per token per rank per layer per payload
	Slots            int   // total slots (pages) in the pool
	SlabBytesMax     int64 // bound on one slab's size; slabs hold whole slots
	Layout           Layout
	// MaxObjects bounds the live objects and so the size of the object tables; 0 means Slots, the
	// worst case of one page per object. When the table is full Reserve treats it as a capacity
	// miss.
	MaxObjects int
	// Policy is the eviction and admission policy (policy.go; the zero value is LRU). It is no
	// layout: it is here because every allocator of a group is built from its Geometry, so that
	// the policy reaches every rank's allocator, its digest's seed and its byte counts as one value.
	Policy Policy
}

// Validate returns a *errscope.ConfigError naming the command-line flag of the first field that
// makes the geometry unusable, including sizes whose byte counts overflow int64 (the largest factor
// of a product that overflows); its reason starts with the value.
func (g Geometry) Validate() error {
	fields := []geometryFlag{
		{"cp", g.CPSize}, {"layers", g.Layers}, {"payloads", g.PayloadsPerLayer},
		{"page-tokens", g.PageTokens}, {"token-bytes", g.TokenBytes}, {"l2-slots", g.Slots},
	}
	for _, field := range fields {
		if field.value <= 0 {
			return &errscope.ConfigError{
				Flag:   field.name,
				Reason: fmt.Sprintf("%d: must be positive", field.value),
			}
		}
	}
	if err := g.checkRanges(); err != nil {
		return err
	}
	// The slot's size is the product of every field but Slots (the first five).
	slotBytes, err := slotBytesOf(fields[:5])
	if err != nil {
		return err
	}
	if err := checkTotalBytes(slotBytes, fields[:5], g.Slots); err != nil {
		return err
	}
	if g.SlabBytesMax < g.SlotBytes() {
		return &errscope.ConfigError{
			Flag: "slab-bytes-max",
			Reason: fmt.Sprintf(
				"%d: smaller than one slot (%d bytes)",
				g.SlabBytesMax,
				g.SlotBytes(),
			),
		}
	}
	return nil
}

// geometryFlag is one of a geometry's counts and the command-line flag that sets it, so that a
// check that finds it wrong can name the flag.
type geometryFlag struct {
	name  string
	value int
}

// checkRanges checks the fields that have a range besides being positive: Slots (a uint32 index),
// Layout, Nodes (a divisor of CPSize) and MaxObjects; Validate checks them after the positive
// counts, before any product of them.
func (g Geometry) checkRanges() error {
	if g.Slots > slotsMax {
		return &errscope.ConfigError{
			Flag:   "l2-slots",
			Reason: fmt.Sprintf("%d: at most %d", g.Slots, slotsMax),
		}
	}
	if g.Layout > PageFirst {
		return &errscope.ConfigError{
			Flag: "layout",
			Reason: fmt.Sprintf(
				"%d: allowed values are %s and %s",
				g.Layout,
				LayerFirst,
				PageFirst,
			),
		}
	}
	if g.Nodes < 0 || g.Nodes > 0 && g.CPSize%g.Nodes != 0 {
		return &errscope.ConfigError{
			Flag: "cp",
			Reason: fmt.Sprintf(
				"%d: must divide CPSize=%d (every node holds as many of the group's ranks)",
				g.Nodes,
				g.CPSize,
			),
		}
	}
	if g.Policy >= policyKinds {
		return &errscope.ConfigError{
			Flag:   "l2-policy",
			Reason: fmt.Sprintf("%d: allowed values are %v", g.Policy, PolicyNames()),
		}
	}
	if g.MaxObjects < 0 || g.MaxObjects > g.Slots {
		return &errscope.ConfigError{
			Flag:   "l2-slots",
			Reason: fmt.Sprintf("%d: must be in [0, Slots=%d]", g.MaxObjects, g.Slots),
		}
	}
	return nil
}

// slotBytesOf is the product of the slot's factors, a slot's bytes over the whole group; when it
// overflows int64 the error blames the largest factor, the likeliest to be the wrong one.
func slotBytesOf(factors []geometryFlag) (int64, error) {
	slotBytes, largest := int64(1), factors[0]
	for _, field := range factors {
		var ok bool
		if slotBytes, ok = mulInt64(slotBytes, int64(field.value)); !ok {
			for _, f := range factors {
				if f.value > largest.value {
					largest = f
				}
			}
			return 0, &errscope.ConfigError{
				Flag: largest.name,
				Reason: fmt.Sprintf(
					"%d: slot bytes (PageTokens*TokenBytes*CPSize*Layers*PayloadsPerLayer) overflow int64",
					largest.value,
				),
			}
		}
	}
	return slotBytes, nil
}

// checkTotalBytes refuses slots slots of slotBytes bytes whose total overflows int64. A factor of
// the slot that overflows with slots by itself is the absurd one (a --layers of 10^16, whose
// tokens a derived --token-bytes made small enough for one slot to fit), so it is named; else
// --l2-slots is.
func checkTotalBytes(slotBytes int64, factors []geometryFlag, slots int) error {
	if _, ok := mulInt64(slotBytes, int64(slots)); ok {
		return nil
	}
	for _, f := range factors {
		if _, ok := mulInt64(int64(f.value), int64(slots)); !ok {
			return &errscope.ConfigError{
				Flag: f.name,
				Reason: fmt.Sprintf(
					"%d: total bytes (a slot's, times Slots=%d) overflow int64",
					f.value,
					slots,
				),
			}
		}
	}
	return &errscope.ConfigError{
		Flag:   "l2-slots",
		Reason: fmt.Sprintf("%d: total bytes overflow int64", slots),
	}
}

// mulInt64 returns a*b for non-negative a and b and whether it fits in int64.
func mulInt64(a, b int64) (int64, bool) {
	if a != 0 && b > math.MaxInt64/a {
		return 0, false
	}
	return a * b, true
}

// PartBytes is the size of one (slot, rank, layer, payload) part.
func (g Geometry) PartBytes() int64 { return int64(g.PageTokens) * int64(g.TokenBytes) }

// nodes resolves the Nodes default.
func (g Geometry) nodes() int { return max(1, g.Nodes) }

// NodeParts is the number of the group's ranks on each of its nodes: the ranks whose parts one
// node's slab holds.
func (g Geometry) NodeParts() int { return g.CPSize / g.nodes() }

// SlotBytes is the size of one slot on one node: every part of one page that the node's ranks hold
// (every rank's on a group of one node).
func (g Geometry) SlotBytes() int64 {
	return g.PartBytes() * int64(g.NodeParts()) * int64(g.Layers) * int64(g.PayloadsPerLayer)
}

// GroupSlotBytes is the size of one slot over the whole group: every rank's parts of one page.
func (g Geometry) GroupSlotBytes() int64 { return g.SlotBytes() * int64(g.nodes()) }

// SlotsPerSlab is the number of slots in every slab but maybe the last: as many whole slots as
// SlabBytesMax holds, and no more than the pool has.
func (g Geometry) SlotsPerSlab() int {
	return int(min(g.SlabBytesMax/g.SlotBytes(), int64(g.Slots)))
}

// SlabCount is the number of slabs, the last one holding the remainder.
func (g Geometry) SlabCount() int {
	perSlab := g.SlotsPerSlab()
	return (g.Slots + perSlab - 1) / perSlab
}

// SlabSlots is the number of slots in slab `slab`; only the last slab may be smaller.
func (g Geometry) SlabSlots(slab int) int {
	perSlab := g.SlotsPerSlab()
	return min(perSlab, g.Slots-slab*perSlab)
}

// SlabBytes is the size of slab `slab`.
func (g Geometry) SlabBytes(slab int) int64 { return int64(g.SlabSlots(slab)) * g.SlotBytes() }

// TotalBytes is the size of all slabs of one node together.
func (g Geometry) TotalBytes() int64 { return int64(g.Slots) * g.SlotBytes() }

// PartOffset is the byte offset inside slab `slab` of a node of the part (slotInSlab, nodePart,
// layer, payload), where nodePart is the rank's index among the group's ranks on its node, in [0,
// NodeParts) (its CP rank on a group of one node). It does not check its arguments, because copy
// loops call it per part; the layout tests pin that every byte of every slab belongs to exactly one
// part.
func (g Geometry) PartOffset(slab, slotInSlab, nodePart, layer, payload int) int64 {
	partBytes := g.PartBytes()
	if g.Layout == LayerFirst {
		region := (int64(nodePart)*int64(g.Layers)+int64(layer))*int64(
			g.PayloadsPerLayer,
		) + int64(
			payload,
		)
		return (region*int64(g.SlabSlots(slab)) + int64(slotInSlab)) * partBytes
	}
	part := ((int64(slotInSlab)*int64(g.NodeParts())+int64(nodePart))*int64(g.Layers)+int64(layer))*int64(
		g.PayloadsPerLayer,
	) + int64(
		payload,
	)
	return part * partBytes
}

// maxObjects resolves the MaxObjects default.
func (g Geometry) maxObjects() int {
	if g.MaxObjects == 0 {
		return g.Slots
	}
	return g.MaxObjects
}
