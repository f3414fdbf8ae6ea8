package cache

import (
	"encoding/binary"

	"github.com/cphicache/cphicache/pool"
)

// KV content. In a real server a page's KV is what the model computed for its tokens. Here every
// part (page, layer, payload) of a rank is a deterministic function of (token, position, layer,
// payload, rank, seed), so any rank can recompute what a page must hold and check a load-back byte
// for byte: a lost write, a stale page or a rank that overwrote another rank's range all show up as
// mismatches.
//
// A part's key is the splitmix64 finaliser (pool.Mix64) of its (seed, rank, layer, payload). A
// token's first word is a bijection of the key xor the token xor its position: a multiply by an odd
// constant, then the high half folded into the low. Its next words step from it by the golden-ratio
// increment (a Weyl sequence). The checks compare words for equality, and a bijection maps distinct
// inputs to distinct words, so at one word a token (and at the same word of wider tokens) this
// finds exactly the wrong words Mix64 found. A word of another index matches only if two first
// words differ by a small multiple of the increment: a 64-bit coincidence with either function (a
// review's check found none in 1.5 M pairs of neighbouring positions and one-bit-apart tokens). A
// word moved within its token reads as wrong, and a token costs one multiply however wide it is.
// (Version 1 took a Mix64 per word; version 2 a Mix64 per token, which was a third of an L2-only
// replay's CPU: fill, audit and load-back each compute it, at 4 GB/s against 7 GB/s for this one.)

// ContentVersion names the content function: the L3 namespace holds it (l3.Namespace.Content), so
// that blocks written under another function are never read as this one's.
const ContentVersion = 3

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

// FillPart writes the content of one part: the tokens of one page starting at position firstPos,
// each token getting tokenBytes bytes. len(dst) must be len(tokens)*tokenBytes, and tokenBytes a
// multiple of 8.
func FillPart(dst []byte, tokens []int32, firstPos int, tokenBytes int, k ContentKey) {
	base := k.base()
	if tokenBytes == 8 {
		fillWords(dst[:8*len(tokens)], tokens, base, uint64(firstPos))
		return
	}
	for i, tok := range tokens {
		h := tokenWord(base, tok, uint64(firstPos+i))
		row := dst[i*tokenBytes : (i+1)*tokenBytes]
		for w := 0; w+8 <= len(row); w += 8 {
			binary.LittleEndian.PutUint64(row[w:], h)
			h += contentStep
		}
	}
}

// PartMatches reports whether got is what FillPart would write. It recomputes the words and
// compares them as it goes, stopping at the first difference: the commit audit reads every rank's
// parts of every object, so this runs once per byte backed up, and writing the expected bytes out
// first would double its memory traffic.
func PartMatches(got []byte, tokens []int32, firstPos int, tokenBytes int, k ContentKey) bool {
	if len(got) != len(tokens)*tokenBytes {
		return false
	}
	base := k.base()
	if tokenBytes == 8 {
		return wordsMatch(got, tokens, base, uint64(firstPos))
	}
	for i, tok := range tokens {
		h := tokenWord(base, tok, uint64(firstPos+i))
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

// tokenWord is a token's first word.
func tokenWord(base uint64, tok int32, pos uint64) uint64 {
	x := (base ^ uint64(uint32(tok)) ^ pos<<32) * contentMultiplier
	return x ^ x>>32
}

// contentMultiplier is odd, so the multiply is a bijection; it is Mix64's first multiplier, not the
// Weyl increment, so that a token's words and its neighbours' first words stay unrelated.
const contentMultiplier = 0xbf58476d1ce4e5b9

// fillWords is FillPart for one word a token (the small parts of a CP rank's share of a small
// model), four tokens an iteration so that their independent Mix64 chains overlap: about twice the
// plain loop's speed.
func fillWords(dst []byte, tokens []int32, base, pos uint64) {
	i := 0
	for ; i+4 <= len(tokens); i += 4 {
		d, t := dst[8*i:8*i+32], tokens[i:i+4]
		binary.LittleEndian.PutUint64(d[0:], tokenWord(base, t[0], pos))
		binary.LittleEndian.PutUint64(d[8:], tokenWord(base, t[1], pos+1))
		binary.LittleEndian.PutUint64(d[16:], tokenWord(base, t[2], pos+2))
		binary.LittleEndian.PutUint64(d[24:], tokenWord(base, t[3], pos+3))
		pos += 4
	}
	for ; i < len(tokens); i, pos = i+1, pos+1 {
		binary.LittleEndian.PutUint64(dst[8*i:], tokenWord(base, tokens[i], pos))
	}
}

// wordsMatch is PartMatches for one word a token, four tokens a comparison.
func wordsMatch(got []byte, tokens []int32, base, pos uint64) bool {
	i := 0
	for ; i+4 <= len(tokens); i += 4 {
		g, t := got[8*i:8*i+32], tokens[i:i+4]
		// Go's | and ^ share a precedence, left to right: each difference needs its parentheses.
		diff := (binary.LittleEndian.Uint64(g[0:]) ^ tokenWord(base, t[0], pos)) |
			(binary.LittleEndian.Uint64(g[8:]) ^ tokenWord(base, t[1], pos+1)) |
			(binary.LittleEndian.Uint64(g[16:]) ^ tokenWord(base, t[2], pos+2)) |
			(binary.LittleEndian.Uint64(g[24:]) ^ tokenWord(base, t[3], pos+3))
		if diff != 0 {
			return false
		}
		pos += 4
	}
	for ; i < len(tokens); i, pos = i+1, pos+1 {
		if binary.LittleEndian.Uint64(got[8*i:]) != tokenWord(base, tokens[i], pos) {
			return false
		}
	}
	return true
}
