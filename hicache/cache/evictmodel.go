package cache

import (
	"fmt"
	"slices"
)

// The eviction queue against its model: the walk-and-sort eviction it replaced. The tests and the simulator
// compare every L1 eviction with it, choice by choice (Config.EvictionModel).

// naiveEvictionOrder is the model: every node of the tree evictable now, least recently used first, ties by id.
func naiveEvictionOrder(c *Core) []*treeNode {
	var candidates []*treeNode
	c.tree.forEach(func(n *treeNode) {
		if c.evictableFromL1(n) {
			candidates = append(candidates, n)
		}
	})
	slices.SortFunc(candidates, func(a, b *treeNode) int {
		if older(a, b) {
			return -1
		}
		return 1
	})
	return candidates
}

// WalkEvictionModel is Config.EvictionModel for the tests and the simulator: it takes the model's order when an eviction begins and checks
// the eviction's choices against it when it ends.
func WalkEvictionModel(c *Core) EvictionCheck {
	model := naiveEvictionOrder(c)
	return func(chosen []*treeNode, freedPages, needPages int) error {
		return compareEviction(model, chosen, freedPages, needPages)
	}
}

// compareEviction: the walk-and-sort eviction took its candidates in order until enough pages were freed or none
// were left, so the choices must be a prefix of the model's order that stops only for one of those reasons.
func compareEviction(model, chosen []*treeNode, freedPages, needPages int) error {
	for i, n := range chosen {
		if i >= len(model) {
			return fmt.Errorf("L1 eviction choice %d is node %d; the model had only %d candidates", i, n.id, len(model))
		}
		if model[i] != n {
			return fmt.Errorf("L1 eviction choice %d is node %d (last access %d), the model's is node %d (last access %d)",
				i, n.id, n.lastAccess, model[i].id, model[i].lastAccess)
		}
	}
	if len(chosen) < len(model) && freedPages < needPages {
		return fmt.Errorf("L1 eviction stopped after %d of the model's %d candidates with %d of %d pages freed",
			len(chosen), len(model), freedPages, needPages)
	}
	return nil
}
