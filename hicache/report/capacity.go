package report

import (
	"fmt"
	"io"
	"strings"

	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The summary's tiers: their capacities in slots, pages, tokens and bytes, and the nodes a group spans.

// writeCapacity states each tier in tokens and bytes, and says plainly when the copies are scaled
// down.
func (r *Report) writeCapacity(w io.Writer) {
	c := r.Capacity
	model := "per token"
	if c.Model != "" {
		model = "per token of " + c.Model
	}
	fmt.Fprintf(
		w,
		"  capacity: L2 %s = %s = %s per CP group; L1 %s = %s = %s per rank; KV %s %s\n",
		errscope.Count(
			c.L2Slots,
			"slot",
			"slots",
		),
		errscope.Count(c.L2Tokens, "token", "tokens"),
		sizing.FormatBytes(c.L2Bytes),
		errscope.Count(c.DevicePages, "page", "pages"),
		errscope.Count(c.DeviceTokens, "token", "tokens"),
		sizing.FormatBytes(c.DeviceBytes),
		sizing.FormatBytes(c.TokenBytes),
		model,
	)
	if c.Scaled {
		fmt.Fprintf(
			w,
			"  copies SCALED DOWN: %s copied per token instead of %s; tokens and hit counts are the real sizes', bytes copied and the slab (%s) are not\n",
			sizing.FormatBytes(
				c.CopiedTokenBytes,
			),
			sizing.FormatBytes(c.TokenBytes),
			sizing.FormatBytes(c.L2SlabBytes),
		)
	}
}

// writeNodes says, for CP groups over several nodes, the nodes each spans and each node's slab. A
// run whose groups each sit on one node says nothing more, as before groups could span nodes.
func (r *Report) writeNodes(w io.Writer) {
	for _, g := range r.Groups {
		if len(g.Nodes) <= 1 {
			continue
		}
		fmt.Fprintf(
			w,
			"  nodes: CP group %d spans %d nodes (%s), a slab of %s on each with its %d ranks' parts\n",
			g.Group,
			len(g.Nodes),
			strings.Join(g.Nodes, ", "),
			sizing.FormatBytes(g.SlabBytesPerNode),
			g.Size/len(g.Nodes),
		)
	}
}

// spansNodes says whether some CP group spans several nodes.
func (r *Report) spansNodes() bool {
	for _, g := range r.Groups {
		if len(g.Nodes) > 1 {
			return true
		}
	}
	return false
}
