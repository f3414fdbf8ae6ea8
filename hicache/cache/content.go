package cache

import (
	"encoding/binary"

	"github.com/cphicache/cphicache/pool"
)

// KV content (pool.Mix64 is the splitmix64 finaliser). In a real server a page's KV is what the model computed
// for its tokens. Here every part (page, layer, payload) of a rank is a deterministic function of (token,
// position, layer, payload, rank, seed), so any rank can recompute what a page must hold and check a load-back
// byte for byte: a lost write, a stale page or a rank that overwrote another rank's range all show up as
// mismatches.
//
// A token's first word is Mix64 of the part's key, the token and its position; its next words step from it by
// the golden-ratio increment (a Weyl sequence), so two tokens (or two parts) share no word but by a 64-bit
// coincidence, a word moved within its token reads as wrong, and a token costs one Mix64 however wide it is.
// (Version 1 took a Mix64 per word: at 8 bytes a token the content function was half of a replay's CPU.)

// ContentVersion names the content function: the L3 namespace holds it (l3.Namespace.Content), so that blocks
// written under another function are never read as this one's.
const ContentVersion = 2

// contentStep is the Weyl increment between the words of a token.
const contentStep = 0x9e3779b97f4a7c15

// ContentKey identifies what one part holds, minus the tokens.
type ContentKey struct {
	Seed    uint64
	Rank    int
	Layer   int
	Payload int
}

func (k ContentKey) base() uint64 {
	return pool.Mix64(k.Seed ^ uint64(k.Rank)<<48 ^ uint64(k.Layer)<<32 ^ uint64(k.Payload)<<24)
}

// FillPart writes the content of one part: the tokens of one page starting at position firstPos, each token
// getting tokenBytes bytes. len(dst) must be len(tokens)*tokenBytes, and tokenBytes a multiple of 8.
func FillPart(dst []byte, tokens []int32, firstPos int, tokenBytes int, k ContentKey) {
	base := k.base()
	for i, tok := range tokens {
		h := pool.Mix64(base ^ uint64(uint32(tok)) ^ uint64(firstPos+i)<<32)
		row := dst[i*tokenBytes : (i+1)*tokenBytes]
		for w := 0; w+8 <= len(row); w += 8 {
			binary.LittleEndian.PutUint64(row[w:], h)
			h += contentStep
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
	base := k.base()
	for i, tok := range tokens {
		h := pool.Mix64(base ^ uint64(uint32(tok)) ^ uint64(firstPos+i)<<32)
		row := got[i*tokenBytes : (i+1)*tokenBytes]
		for w := 0; w+8 <= len(row); w += 8 {
			if binary.LittleEndian.Uint64(row[w:]) != h {
				return false
			}
			h += contentStep
		}
	}
	return true
}
