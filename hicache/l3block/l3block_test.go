package l3block

import (
	"testing"

	"github.com/cespare/xxhash/v2"
)

// TestChainKeyIsAPrefixHash: a key depends on the block's tokens and every earlier block's, so
// equal keys name equal prefixes.
func TestChainKeyIsAPrefixHash(t *testing.T) {
	first := ChainKey(0, []int32{1, 2, 3, 4})
	if ChainKey(first, []int32{5, 6}) == ChainKey(ChainKey(0, []int32{1, 2, 3, 9}), []int32{5, 6}) {
		t.Error("a second block's key does not depend on the first block's tokens")
	}
	if ChainKey(0, []int32{1, 2}) == ChainKey(0, []int32{2, 1}) ||
		ChainKey(0, []int32{1}) == ChainKey(1, []int32{1}) {
		t.Error("order or chaining ignored")
	}
}

// TestChainKeyIsTheHashOfItsBytes holds the in-place hash to the byte string it stands for
// (prevKey, then every token, little-endian) at every length up to a few blocks and for negative
// tokens, and pins two keys: a key names a block's file, so a change of the function would orphan
// every L3 directory.
func TestChainKeyIsTheHashOfItsBytes(t *testing.T) {
	tokens := make([]int32, 1100)
	for i := range tokens {
		tokens[i] = int32(uint32(i) * 2654435761)
	}
	for n := 0; n <= len(tokens); n += 1 + n/8 {
		prev := uint64(n) * 0x9e3779b97f4a7c15
		if got, want := ChainKey(prev, tokens[:n]), xxhash.Sum64(chainKeyBytes(prev, tokens[:n])); got != want {
			t.Fatalf("%d tokens: ChainKey %#x, the hash of its bytes %#x", n, got, want)
		}
	}
	block := make([]int32, 512)
	for i := range block {
		block[i] = int32(i*7919 - 100000)
	}
	if got, got2 := ChainKey(0, []int32{1, 2, 3, 4}), ChainKey(0x0123456789abcdef, block); got != 0x8752c74bc787fd40 ||
		got2 != 0xf516d38f1af85617 {
		t.Fatalf(
			"keys %#x and %#x, want the pinned 0x8752c74bc787fd40 and 0xf516d38f1af85617",
			got,
			got2,
		)
	}
}

// BenchmarkChainKey is one 512-token block's key, as the core computes it for every block of a
// prompt it looks up or writes.
func BenchmarkChainKey(b *testing.B) {
	block := make([]int32, 512)
	b.SetBytes(int64(4 * len(block)))
	for b.Loop() {
		ChainKey(7, block)
	}
}
