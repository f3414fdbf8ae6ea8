package sim

import (
	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/pool"
)

// Memory is a CP group's memory in ordinary Go slices, the simulator's (test support, kept out of
// the core and the runner): each node's shared slab and each rank's device KV buffer, with the
// copies and the content checks an Env does on real memory (the real runner's go through kernels
// and the mapped slab instead). Every byte is the content function's, so a load-back, an audit or
// an L3 block made of the wrong bytes shows as it would in a run. It does no I/O.
type Memory struct {
	g           pool.Geometry
	devicePages int
	nodes       cache.NodePlacement
	// by the group's node, then slab: each node's slabs hold its ranks' parts only
	NodeSlabs [][][]byte
	Devices   [][]byte // by CP rank
	seed      uint64
	part      []byte // scratch: one part's content
}

// NewMemoryOnNodes allocates a group's memory for g with its ranks placed on nodes as p says: one
// set of slabs per node, and every CP rank's device buffer of devicePages pages.
func NewMemoryOnNodes(
	g pool.Geometry,
	p cache.NodePlacement,
	devicePages int,
	seed uint64,
) *Memory {
	m := &Memory{
		g:           g,
		devicePages: devicePages,
		nodes:       p,
		seed:        seed,
		part:        make([]byte, g.PartBytes()),
	}
	for range p.Nodes() {
		var slabs [][]byte
		for i := range g.SlabCount() {
			slabs = append(slabs, make([]byte, g.SlabBytes(i)))
		}
		m.NodeSlabs = append(m.NodeSlabs, slabs)
	}
	for range g.CPSize {
		m.Devices = append(m.Devices, make([]byte, cache.DeviceBytes(g, devicePages)))
	}
	return m
}

// partOf is where rank's parts are: its node's slabs and its part index in them.
func (m *Memory) partOf(rank int) ([][]byte, int) {
	return m.NodeSlabs[m.nodes.Node[rank]], m.nodes.Part[rank]
}

func (m *Memory) deviceOffset(page int32, layer, payload int) int64 {
	part := (int64(layer)*int64(m.g.PayloadsPerLayer)+int64(payload))*int64(m.devicePages) + int64(page)
	return part * m.g.PartBytes()
}

func (m *Memory) key(rank, layer, payload int) cache.ContentKey {
	return cache.ContentKey{Seed: m.seed, Rank: rank, Layer: layer, Payload: payload}
}

// eachPart visits every (page, layer, payload) part of rank: its device bytes and its slab bytes.
func (m *Memory) eachPart(
	rank int,
	pages []int32,
	slots []cache.SlabSlot,
	visit func(device, slab []byte),
) {
	pb := m.g.PartBytes()
	slabs, part := m.partOf(rank)
	for i, page := range pages {
		s := slots[i]
		for layer := range m.g.Layers {
			for payload := range m.g.PayloadsPerLayer {
				d := m.deviceOffset(page, layer, payload)
				o := m.g.PartOffset(int(s.Slab), int(s.Slot), part, layer, payload)
				visit(m.Devices[rank][d:d+pb], slabs[s.Slab][o:o+pb])
			}
		}
	}
}

// Copy carries out rank's copy, whole.
func (m *Memory) Copy(rank int, c *cache.Copy) {
	m.eachPart(rank, c.DevicePages, c.Slots, func(device, slab []byte) {
		if c.Gather {
			copy(slab, device)
		} else {
			copy(device, slab)
		}
	})
}

// Fill writes rank's computed KV into its device pages.
func (m *Memory) Fill(rank int, f *cache.Fill) {
	pt := m.g.PageTokens
	for i, page := range f.DevicePages {
		for layer := range m.g.Layers {
			for payload := range m.g.PayloadsPerLayer {
				d := m.deviceOffset(page, layer, payload)
				cache.FillPart(
					m.Devices[rank][d:d+m.g.PartBytes()],
					f.Tokens[i*pt:(i+1)*pt],
					f.StartPos+i*pt,
					m.g.TokenBytes,
					m.key(rank, layer, payload),
				)
			}
		}
	}
}

// Verify checks rank's finished load-back: pages checked, and those with a wrong byte.
func (m *Memory) Verify(rank int, v *cache.Verify) (checked, mismatches int64) {
	pt := m.g.PageTokens
	for i, page := range v.DevicePages {
		bad := false
		for layer := range m.g.Layers {
			for payload := range m.g.PayloadsPerLayer {
				d := m.deviceOffset(page, layer, payload)
				if !cache.PartMatches(
					m.Devices[rank][d:d+m.g.PartBytes()],
					v.Tokens[i*pt:(i+1)*pt],
					v.StartPos+i*pt,
					m.g.TokenBytes,
					m.key(rank, layer, payload),
				) {
					bad = true
				}
			}
		}
		checked++
		if bad {
			mismatches++
		}
	}
	return checked, mismatches
}

// SlotsMatch checks every rank's parts of slots against the content of tokens from startPos.
func (m *Memory) SlotsMatch(slots []cache.SlabSlot, tokens []int32, startPos int) bool {
	for node := range m.NodeSlabs {
		if !m.NodeSlotsMatch(node, slots, tokens, startPos, m.g.NodeParts()) {
			return false
		}
	}
	return true
}

// NodeSlotsMatch checks the node-local parts [0, parts) of slots in node's slabs, as that node's
// auditor does.
func (m *Memory) NodeSlotsMatch(
	node int,
	slots []cache.SlabSlot,
	tokens []int32,
	startPos, parts int,
) bool {
	pt, pb := m.g.PageTokens, m.g.PartBytes()
	ranks := m.nodes.RanksOn(node)
	for i, s := range slots {
		for part, rank := range ranks[:parts] {
			for layer := range m.g.Layers {
				for payload := range m.g.PayloadsPerLayer {
					o := m.g.PartOffset(int(s.Slab), int(s.Slot), part, layer, payload)
					if !cache.PartMatches(
						m.NodeSlabs[node][s.Slab][o:o+pb],
						tokens[i*pt:(i+1)*pt],
						startPos+i*pt,
						m.g.TokenBytes,
						m.key(rank, layer, payload),
					) {
						return false
					}
				}
			}
		}
	}
	return true
}
