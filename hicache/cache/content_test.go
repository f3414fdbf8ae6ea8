package cache

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cphicache/cphicache/pool"
)

// naiveFill is the content function as DESIGN.md states it, one word at a time: the model FillPart's fast paths
// (one word a token, four tokens an iteration) must equal.
func naiveFill(tokens []int32, firstPos, tokenBytes int, k ContentKey) []byte {
	out := make([]byte, 0, len(tokens)*tokenBytes)
	base := pool.Mix64(k.Seed ^ uint64(k.Rank)<<48 ^ uint64(k.Layer)<<32 ^ uint64(k.Payload)<<24)
	for i, tok := range tokens {
		h := pool.Mix64(base ^ uint64(uint32(tok)) ^ uint64(firstPos+i)<<32)
		for range tokenBytes / 8 {
			out = binary.LittleEndian.AppendUint64(out, h)
			h += 0x9e3779b97f4a7c15
		}
	}
	return out
}

// TestContentMatchesTheNaiveFunction: every width and length (the unrolled loop's tails too) writes what the
// naive function does, PartMatches accepts it, and a flipped byte anywhere is refused.
func TestContentMatchesTheNaiveFunction(t *testing.T) {
	k := ContentKey{Seed: 7, Rank: 3, Layer: 1, Payload: 1}
	for _, tokenBytes := range []int{8, 16, 24} {
		for n := range 10 {
			tokens := make([]int32, n)
			for i := range tokens {
				tokens[i] = int32(1000*n + 17*i)
			}
			want := naiveFill(tokens, 40+n, tokenBytes, k)
			got := make([]byte, len(want))
			FillPart(got, tokens, 40+n, tokenBytes, k)
			if !bytes.Equal(got, want) {
				t.Fatalf("%d tokens of %d bytes: FillPart differs from the naive function", n, tokenBytes)
			}
			if !PartMatches(want, tokens, 40+n, tokenBytes, k) {
				t.Fatalf("%d tokens of %d bytes: PartMatches refuses the naive function's bytes", n, tokenBytes)
			}
			for i := range want {
				want[i] ^= 0x04
				if PartMatches(want, tokens, 40+n, tokenBytes, k) {
					t.Fatalf("%d tokens of %d bytes: a flipped byte %d went unseen", n, tokenBytes, i)
				}
				want[i] ^= 0x04
			}
		}
	}
}
