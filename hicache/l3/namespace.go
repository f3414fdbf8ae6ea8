package l3

import (
	"encoding/binary"
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Namespace is everything that changes a block's bytes. Two jobs share blocks only when every field is equal,
// so a block is never read by a job whose KV it does not match: the fingerprint is part of the header and of
// the path.
type Namespace struct {
	Layers      int    // --layers
	Payloads    int    // --payloads: per layer (K and V, or one MLA latent)
	PageTokens  int    // --page-tokens: a block is whole pages
	TokenBytes  int    // --token-bytes: one rank's bytes of one token in one layer and payload
	CPSize      int    // --cp: a block holds every rank's parts
	ContentSeed uint64 // --seed: the synthetic KV content's seed
	Content     uint64 // the content function's version (cache.ContentVersion): a new function makes new bytes
	Name        string // --l3-namespace: model name, weights version, dtype; free-form
}

// fingerprintVersion changes when the encoding below does, so an old fingerprint is never reused for new bytes.
const fingerprintVersion = 2 // 2: the content function's version joined the fields

// Fingerprint is stable across processes, machines and releases of this encoding: xxhash64 of the fields in a
// fixed order as little-endian 64-bit words, then the name's length and bytes.
func (n Namespace) Fingerprint() uint64 {
	b := make([]byte, 0, 9*8+len(n.Name))
	for _, v := range []uint64{fingerprintVersion, uint64(n.Layers), uint64(n.Payloads), uint64(n.PageTokens),
		uint64(n.TokenBytes), uint64(n.CPSize), n.ContentSeed, n.Content, uint64(len(n.Name))} {
		b = binary.LittleEndian.AppendUint64(b, v)
	}
	return xxhash.Sum64(append(b, n.Name...))
}

// String is the printable form, written beside the blocks (namespaceFile) so that `cphicache l3 stat` can say
// what a fingerprint stands for.
func (n Namespace) String() string {
	return fmt.Sprintf("layers=%d payloads=%d page_tokens=%d token_bytes=%d cp=%d seed=%d content=v%d namespace=%q",
		n.Layers, n.Payloads, n.PageTokens, n.TokenBytes, n.CPSize, n.ContentSeed, n.Content, n.Name)
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
	return nil
}

// PayloadBytes is a block's payload size for tokenCount tokens: every rank's, layer's and payload's part.
func (n Namespace) PayloadBytes(tokenCount int) int64 {
	return int64(tokenCount) * int64(n.TokenBytes) * int64(n.Layers) * int64(n.Payloads) * int64(n.CPSize)
}

// PartOffset is where (rank, layer, payload)'s part of a block of tokenCount tokens begins: the canonical order
// is rank-major, then layer, then payload, each part tokenCount x TokenBytes contiguous bytes. It is the one
// order every writer and reader uses, whatever the L2's layout.
func (n Namespace) PartOffset(tokenCount, rank, layer, payload int) int64 {
	part := int64(tokenCount) * int64(n.TokenBytes)
	return ((int64(rank)*int64(n.Layers)+int64(layer))*int64(n.Payloads) + int64(payload)) * part
}

// ChainKey is a block's key: a hash of its tokens chained over every earlier block's key, so equal keys mean
// equal prefixes and an L3 hit is always a prefix. The first block's prevKey is 0.
func ChainKey(prevKey uint64, tokens []int32) uint64 {
	b := make([]byte, 8, 8+4*len(tokens))
	binary.LittleEndian.PutUint64(b, prevKey)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return xxhash.Sum64(b)
}
