package l3

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Namespace is everything that changes a block's bytes. Two jobs share blocks only when every field
// is equal, so a block is never read by a job whose KV it does not match: the fingerprint is part
// of the header and of the path.
type Namespace struct {
	Layers     int // --layers
	Payloads   int // --payloads: per layer (K and V, or one MLA latent)
	PageTokens int // --page-tokens: a block is whole pages
	TokenBytes int // --token-bytes: one rank's bytes of one token in one layer and payload
	CPSize     int // --cp: a block holds every rank's parts
	// the nodes the CP group spans: a block is one part-file a node, of its ranks' parts; 0 is 1
	Nodes       int
	ContentSeed uint64 // --seed: the synthetic KV content's seed
	// the content function's version (cache.ContentVersion): a new function makes new bytes
	Content uint64
	Name    string // --l3-namespace: model name, weights version, dtype; free-form
}

// fingerprintVersion changes when the encoding below does, so an old fingerprint is never reused
// for new bytes.
const fingerprintVersion = 2 // 2: the content function's version joined the fields

// Fingerprint is stable across processes, machines and releases of this encoding: xxhash64 of the
// fields in a fixed order as little-endian 64-bit words, then the name's length and bytes, then,
// for a group over several nodes only, the node count (after the name, whose length comes first, so
// no name can mimic it): a group on one node keeps the fingerprint it always had, and a group of
// another shape never reads these blocks.
func (n Namespace) Fingerprint() uint64 {
	b := make([]byte, 0, 10*8+len(n.Name))
	for _, v := range []uint64{fingerprintVersion, uint64(n.Layers), uint64(n.Payloads), uint64(n.PageTokens),
		uint64(n.TokenBytes), uint64(n.CPSize), n.ContentSeed, n.Content, uint64(len(n.Name))} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	b = append(b, n.Name...)
	if n.nodes() > 1 {
		b = binary.LittleEndian.AppendUint64(b, uint64(n.Nodes))
	}
	return xxhash.Sum64(b)
}

// nodes resolves the Nodes default: one file a block.
func (n Namespace) nodes() int { return max(1, n.Nodes) }

// FileParts is the ranks whose parts one block file holds: every rank's on one node, a node's
// ranks' else.
func (n Namespace) FileParts() int { return n.CPSize / n.nodes() }

// String is the printable form, written beside the blocks (namespaceFile) so that `cphicache l3
// stat` can say what a fingerprint stands for.
func (n Namespace) String() string {
	nodes := ""
	if n.nodes() > 1 {
		nodes = fmt.Sprintf(" nodes=%d", n.Nodes)
	}
	return fmt.Sprintf(
		"layers=%d payloads=%d page_tokens=%d token_bytes=%d cp=%d%s seed=%d content=v%d namespace=%q",
		n.Layers,
		n.Payloads,
		n.PageTokens,
		n.TokenBytes,
		n.CPSize,
		nodes,
		n.ContentSeed,
		n.Content,
		n.Name,
	)
}

// Validate refuses a geometry that has no bytes.
func (n Namespace) Validate() error {
	for _, f := range []struct {
		name  string
		value int
	}{{"layers", n.Layers}, {"payloads", n.Payloads}, {"page tokens", n.PageTokens}, {"token bytes", n.TokenBytes}, {"cp size", n.CPSize}} {
		if f.value < 1 {
			return fmt.Errorf("l3 namespace: %s %d, want 1 or more", f.name, f.value)
		}
	}
	if n.Nodes < 0 || n.CPSize%n.nodes() != 0 {
		return fmt.Errorf(
			"l3 namespace: %d nodes for cp size %d: each node must hold as many of the group's ranks",
			n.Nodes,
			n.CPSize,
		)
	}
	return nil
}

// PayloadBytes is one block file's payload size for tokenCount tokens: every layer's and payload's
// part of the FileParts ranks it holds (every rank's, for a group on one node).
func (n Namespace) PayloadBytes(tokenCount int) int64 {
	return int64(
		tokenCount,
	) * int64(
		n.TokenBytes,
	) * int64(
		n.Layers,
	) * int64(
		n.Payloads,
	) * int64(
		n.FileParts(),
	)
}

// PartOffset is where (rank, layer, payload)'s part of a block file of tokenCount tokens begins,
// rank being the rank's index among the file's (its CP rank on one node, its node-local part index
// on a group over several): the canonical order is rank-major, then layer, then payload, each part
// tokenCount x TokenBytes contiguous bytes. It is the one order every writer and reader uses,
// whatever the L2's layout.
func (n Namespace) PartOffset(tokenCount, rank, layer, payload int) int64 {
	if rank < 0 || rank >= n.FileParts() || layer < 0 || layer >= n.Layers || payload < 0 ||
		payload >= n.Payloads {
		panic(
			brokenBlock(
				header{
					tokenCount:   uint64(tokenCount),
					payloadBytes: uint64(n.PayloadBytes(tokenCount)),
				},
				n,
				"part (rank %d, layer %d, payload %d) of a block: no such part in its file",
				rank,
				layer,
				payload,
			),
		)
	}
	part := int64(tokenCount) * int64(n.TokenBytes)
	return ((int64(rank)*int64(n.Layers)+int64(layer))*int64(n.Payloads) + int64(payload)) * part
}
