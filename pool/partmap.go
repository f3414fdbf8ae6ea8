package pool

// PartMap is Geometry.PartOffset with the geometry's divisions done once: the copy, audit and L3
// loops ask for a part's offset once per part, and PartOffset's slots-per-slab division was 3% of a
// replay's CPU. Make it with Geometry.PartMap; it answers what PartOffset answers for every part
// (the layout tests hold the two together), and like PartOffset it does not check its arguments.
type PartMap struct {
	layout       Layout
	partBytes    int64
	nodeParts    int64
	layers       int64
	payloads     int64
	slots        int64
	slotsPerSlab int64
}

// PartMap precomputes what PartOffset divides for.
func (g Geometry) PartMap() PartMap {
	return PartMap{
		layout:       g.Layout,
		partBytes:    g.PartBytes(),
		nodeParts:    int64(g.NodeParts()),
		layers:       int64(g.Layers),
		payloads:     int64(g.PayloadsPerLayer),
		slots:        int64(g.Slots),
		slotsPerSlab: int64(g.SlotsPerSlab()),
	}
}

// Offset is PartOffset(slab, slotInSlab, nodePart, layer, payload).
func (m PartMap) Offset(slab, slotInSlab, nodePart, layer, payload int) int64 {
	if m.layout == LayerFirst {
		slabSlots := min(m.slotsPerSlab, m.slots-int64(slab)*m.slotsPerSlab)
		region := (int64(nodePart)*m.layers+int64(layer))*m.payloads + int64(payload)
		return (region*slabSlots + int64(slotInSlab)) * m.partBytes
	}
	part := ((int64(slotInSlab)*m.nodeParts+int64(nodePart))*m.layers+int64(layer))*m.payloads + int64(
		payload,
	)
	return part * m.partBytes
}
