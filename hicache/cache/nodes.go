package cache

import "fmt"

// NodePlacement says where a CP group's ranks are when the group spans several nodes (DESIGN.md,
// "The shared slab"): by CP rank, the index of its node among the group's nodes, and its part index
// in that node's slab (its rank among the group's ranks on the node, in CP-rank order). The runner
// learns it from the topology; the simulator draws it. The core itself needs only its own rank's
// entry (Config.GroupNode, Config.NodePart).
type NodePlacement struct {
	Node []int // by CP rank
	Part []int // by CP rank
}

// PlaceOnNodes spreads cp ranks over nodes nodes of equal share: in blocks (ranks [0, cp/nodes) on
// node 0, as mpirun places "-np 8 ... : -np 8 ...") or round robin (rank r on node r mod nodes, as
// --map-by node does).
func PlaceOnNodes(cp, nodes int, roundRobin bool) NodePlacement {
	nodes = max(1, nodes)
	p := NodePlacement{Node: make([]int, cp), Part: make([]int, cp)}
	share := cp / nodes
	for r := range cp {
		if roundRobin {
			p.Node[r], p.Part[r] = r%nodes, r/nodes
		} else {
			p.Node[r], p.Part[r] = r/share, r%share
		}
	}
	return p
}

// RanksOn lists the CP ranks of node's parts, by part.
func (p NodePlacement) RanksOn(node int) []int {
	var ranks []int
	for part := 0; ; part++ {
		found := false
		for r := range p.Node {
			if p.Node[r] == node && p.Part[r] == part {
				ranks, found = append(ranks, r), true
			}
		}
		if !found {
			return ranks
		}
	}
}

// Nodes is the number of nodes the placement spans.
func (p NodePlacement) Nodes() int { return max(1, slicesMax(p.Node)+1) }

func slicesMax(s []int) int {
	m := -1
	for _, v := range s {
		m = max(m, v)
	}
	return m
}

// checkNodes verifies the core's own place against its geometry: a part inside its node's share, a
// node inside the group. On one node the part is the CP rank, whatever the configuration says.
func (cfg *Config) checkNodes() error {
	g := cfg.Geometry
	if g.Nodes <= 1 {
		return nil
	}
	if cfg.NodePart < 0 || cfg.NodePart >= g.NodeParts() || cfg.GroupNode < 0 ||
		cfg.GroupNode >= g.Nodes {
		return fmt.Errorf(
			"CP rank %d: node-local part %d of %d, node %d of %d: outside the group's layout",
			cfg.CPRank,
			cfg.NodePart,
			g.NodeParts(),
			cfg.GroupNode,
			g.Nodes,
		)
	}
	return nil
}

// nodePart is this rank's part index in its node's slab: its CP rank on a group of one node.
func (c *Core) nodePart() int {
	if c.cfg.Geometry.Nodes <= 1 {
		return c.cfg.CPRank
	}
	return c.cfg.NodePart
}
