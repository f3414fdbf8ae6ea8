// Package l3block is an L3 block as the IO-free core and the L3 store both name it: its key
// (ChainKey, a hash of its tokens chained over every earlier block's) and where each of its pages
// lies in the CP group's shared L2 (PageSlot). The core computes keys and hands out page slots; the
// store (hicache/l3) names files by the keys and copies the pages; neither needs the other for
// these names.
//
// It is a leaf: it imports nothing of this module, and no files, clock, sync, logging or
// randomness, so that the core (hicache/cache) and the simulator reach the store's names without
// linking the store (internal/lint's TestCodeMapImports holds it, and them, to that over every
// dependency).
package l3block

import (
	"encoding/binary"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// PageSlot is where one page of a block lives in the CP group's shared L2: a slab and a slot in it.
type PageSlot struct{ Slab, Slot int32 }

// ChainKey is a block's key: a hash of its tokens chained over every earlier block's key, so equal
// keys mean equal prefixes and an L3 hit is always a prefix. The first block's prevKey is 0. The
// key is xxhash64 of prevKey and then each token, all little-endian (chainKeyBytes); it names the
// block's file, so it must not change. The tokens are hashed where they lie, on a little-endian
// machine, where []int32 is those bytes already: building the byte string first was three quarters
// of the key's cost, 7% of an L3 replay's CPU.
func ChainKey(prevKey uint64, tokens []int32) uint64 {
	if !littleEndian || len(tokens) == 0 {
		return xxhash.Sum64(chainKeyBytes(prevKey, tokens))
	}
	var prev [8]byte
	binary.LittleEndian.PutUint64(prev[:], prevKey)
	var d xxhash.Digest
	d.Reset()
	d.Write(prev[:])
	d.Write(unsafe.Slice((*byte)(unsafe.Pointer(&tokens[0])), 4*len(tokens)))
	return d.Sum64()
}

// chainKeyBytes is the byte string ChainKey hashes: prevKey, then every token, each little-endian.
func chainKeyBytes(prevKey uint64, tokens []int32) []byte {
	b := make([]byte, 8, 8+4*len(tokens))
	binary.LittleEndian.PutUint64(b, prevKey)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	return b
}

// littleEndian: this machine stores an int32 as its little-endian bytes.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1
