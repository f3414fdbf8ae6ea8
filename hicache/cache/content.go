package cache

import (
	"encoding/binary"

	"github.com/cphicache/cphicache/pool"
)

// KV content (pool.Mix64 is the splitmix64 finaliser). In a real server a page's KV is what the model computed for its tokens. Here every part (page,
// layer, payload) of a rank is a deterministic function of (token, position, layer, payload, rank, seed), so any
// rank can recompute what a page must hold and check a load-back byte for byte: a lost write, a stale page or a
// rank that overwrote another rank's range all show up as mismatches.

// ContentKey identifies what one part holds, minus the tokens.
type ContentKey struct {
	Seed    uint64
	Rank    int
	Layer   int
	Payload int
}

// FillPart writes the content of one part: the tokens of one page starting at position firstPos, each token
// getting tokenBytes bytes. len(dst) must be len(tokens)*tokenBytes, and tokenBytes a multiple of 8.
func FillPart(dst []byte, tokens []int32, firstPos int, tokenBytes int, k ContentKey) {
	base := pool.Mix64(k.Seed ^ uint64(k.Rank)<<48 ^ uint64(k.Layer)<<32 ^ uint64(k.Payload)<<24)
	for i, tok := range tokens {
		h := pool.Mix64(base ^ uint64(uint32(tok)) ^ uint64(firstPos+i)<<32)
		row := dst[i*tokenBytes : (i+1)*tokenBytes]
		for w := 0; w < tokenBytes; w += 8 {
			h = pool.Mix64(h + 0x9e3779b97f4a7c15)
			binary.LittleEndian.PutUint64(row[w:], h)
		}
	}
}

// PartMatches reports whether got is what FillPart would write. It recomputes the words and compares them as it
// goes, stopping at the first difference: the commit audit reads every rank's parts of every object, so this runs
// once per byte backed up, and writing the expected bytes out first would double its memory traffic.
func PartMatches(got []byte, tokens []int32, firstPos int, tokenBytes int, k ContentKey) bool {
	if len(got) != len(tokens)*tokenBytes {
		return false
	}
	base := pool.Mix64(k.Seed ^ uint64(k.Rank)<<48 ^ uint64(k.Layer)<<32 ^ uint64(k.Payload)<<24)
	for i, tok := range tokens {
		h := pool.Mix64(base ^ uint64(uint32(tok)) ^ uint64(firstPos+i)<<32)
		row := got[i*tokenBytes : (i+1)*tokenBytes]
		for w := 0; w < tokenBytes; w += 8 {
			h = pool.Mix64(h + 0x9e3779b97f4a7c15)
			if binary.LittleEndian.Uint64(row[w:]) != h {
				return false
			}
		}
	}
	return true
}
