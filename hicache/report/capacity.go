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
// down. With a model (Capacity.Model) each tier's bytes are the model's, per CP group and per node
// too; without one the line is the geometry's, as it always was.
func (r *Report) writeCapacity(w io.Writer) {
	c := r.Capacity
	if c.SizedBy != "" {
		fmt.Fprintf(
			w,
			"  geometry sized from the model and the GPU (no L1 or L2 size given), MODELLED: %s\n",
			c.SizedBy,
		)
	}
	model, l2Node, l1More, l3 := "per token", "", "", ""
	if c.Model != "" {
		model = "per token of " + c.Model
		l2Node = ", " + sizing.FormatBytes(c.L2BytesPerNode) + " per node"
		l1More = fmt.Sprintf(
			" (a GPU), %s per CP group, %s per node",
			sizing.FormatBytes(c.DeviceBytesPerGroup),
			sizing.FormatBytes(c.DeviceBytesPerNode),
		)
		if c.L3Bytes > 0 {
			l3 = fmt.Sprintf(
				"; L3 %s = %s per CP group, %s per node",
				errscope.Count(c.L3Tokens, "token", "tokens"),
				sizing.FormatBytes(c.L3Bytes),
				sizing.FormatBytes(c.L3BytesPerNode),
			)
		}
	}
	fmt.Fprintf(
		w,
		"  capacity: L2 %s = %s = %s per CP group%s; L1 %s = %s = %s per rank%s%s; KV %s %s\n",
		errscope.Count(c.L2Slots, "slot", "slots"),
		errscope.Count(c.L2Tokens, "token", "tokens"),
		sizing.FormatBytes(c.L2Bytes),
		l2Node,
		errscope.Count(c.DevicePages, "page", "pages"),
		errscope.Count(c.DeviceTokens, "token", "tokens"),
		sizing.FormatBytes(c.DeviceBytes),
		l1More,
		l3,
		sizing.FormatBytes(c.TokenBytes),
		model,
	)
	if c.Scaled {
		fmt.Fprintf(
			w,
			"  copies SCALED DOWN: %s copied per token instead of %s; tokens and hit counts are the real sizes', bytes copied and the slab (%s) are not%s\n",
			sizing.FormatBytes(c.CopiedTokenBytes),
			sizing.FormatBytes(c.TokenBytes),
			sizing.FormatBytes(c.L2SlabBytes),
			replayed(c),
		)
	}
}

// replayed is, with a model, what the scaled-down copies replay of L1 and of the L3's budget
// beside the slab.
func replayed(c Capacity) string {
	if c.Model == "" {
		return ""
	}
	text := "; replayed: L1 " + sizing.FormatBytes(c.DeviceBufBytes) + " per rank"
	if c.L3StoreBytes > 0 {
		text += ", the L3's budget " + sizing.FormatBytes(c.L3StoreBytes) + " per CP group"
	}
	return text
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
