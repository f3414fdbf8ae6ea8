package cache

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cphicache/cphicache/pool"
)

// naiveFill is the content function as DESIGN.md states it, one word at a time: the model
// FillPart's fast paths (one word a token, four tokens an iteration) must equal.
func naiveFill(tokens []int32, firstPos, tokenBytes int, k ContentKey) []byte {
	out := make([]byte, 0, len(tokens)*tokenBytes)
	base := pool.Mix64(k.Seed ^ uint64(k.Rank)<<48 ^ uint64(k.Layer)<<32 ^ uint64(k.Payload)<<24)
	for i, tok := range tokens {
		x := (base ^ uint64(uint32(tok)) ^ uint64(firstPos+i)<<32) * 0xbf58476d1ce4e5b9
		h := x ^ x>>32
		for range tokenBytes / 8 {
			out = binary.LittleEndian.AppendUint64(out, h)
			h += 0x9e3779b97f4a7c15
		}
	}
	return out
}

// TestContentMatchesTheNaiveFunction: every width and length (the unrolled loop's tails too) writes
// what the naive function does, PartMatches accepts it, and a flipped byte anywhere is refused.
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
				t.Fatalf(
					"%d tokens of %d bytes: FillPart differs from the naive function",
					n,
					tokenBytes,
				)
			}
			if !PartMatches(want, tokens, 40+n, tokenBytes, k) {
				t.Fatalf(
					"%d tokens of %d bytes: PartMatches refuses the naive function's bytes",
					n,
					tokenBytes,
				)
			}
			for i := range want {
				want[i] ^= 0x04
				if PartMatches(want, tokens, 40+n, tokenBytes, k) {
					t.Fatalf(
						"%d tokens of %d bytes: a flipped byte %d went unseen",
						n,
						tokenBytes,
						i,
					)
				}
				want[i] ^= 0x04
			}
		}
	}
}

// BenchmarkContent measures the content function at one word a token (the replay's default), in
// bytes of parts a second: FillPart writes a page's part, PartMatches checks it.
func BenchmarkContent(b *testing.B) {
	tokens := make([]int32, 64)
	for i := range tokens {
		tokens[i] = int32(i * 7919)
	}
	part := make([]byte, 8*len(tokens))
	k := ContentKey{Seed: 1, Rank: 3}
	b.Run("FillPart", func(b *testing.B) {
		b.SetBytes(int64(len(part)))
		for i := 0; b.Loop(); i++ {
			FillPart(part, tokens, i, 8, k)
		}
	})
	b.Run("PartMatches", func(b *testing.B) {
		FillPart(part, tokens, 0, 8, k)
		b.SetBytes(int64(len(part)))
		for b.Loop() {
			if !PartMatches(part, tokens, 0, 8, k) {
				b.Fatal("a part FillPart wrote does not match")
			}
		}
	})
}
