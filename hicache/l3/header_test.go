package l3

import (
	"bytes"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := header{fingerprint: 1, key: 2, tokenCount: 3, payloadBytes: 4, payloadSum: 5}
	got, reason := parseHeader(h.encode())
	if reason != "" || got != h {
		t.Errorf("parsed %+v (%s), want %+v", got, reason, h)
	}
}

// TestChainKeyIsAPrefixHash: a key depends on the block's tokens and every earlier block's, so equal keys
// name equal prefixes.
func TestChainKeyIsAPrefixHash(t *testing.T) {
	first := ChainKey(0, []int32{1, 2, 3, 4})
	if ChainKey(first, []int32{5, 6}) == ChainKey(ChainKey(0, []int32{1, 2, 3, 9}), []int32{5, 6}) {
		t.Error("a second block's key does not depend on the first block's tokens")
	}
	if ChainKey(0, []int32{1, 2}) == ChainKey(0, []int32{2, 1}) || ChainKey(0, []int32{1}) == ChainKey(1, []int32{1}) {
		t.Error("order or chaining ignored")
	}
}

// FuzzParseHeader: the parser never panics on any bytes, and what it accepts is exactly what encode writes,
// so no two byte strings parse to the same header.
func FuzzParseHeader(f *testing.F) {
	f.Add(header{fingerprint: testNS.Fingerprint(), key: 9, tokenCount: 4, payloadBytes: 256, payloadSum: 1}.encode())
	f.Add([]byte(magic))
	f.Add(make([]byte, headerBytes))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, reason := parseHeader(b)
		if reason != "" {
			return
		}
		if !bytes.Equal(h.encode(), b[:headerBytes]) {
			t.Fatalf("accepted %x as %+v, which encodes as %x", b[:headerBytes], h, h.encode())
		}
		_ = checkHeader(h, testNS, testNS.Fingerprint(), h.key)
	})
}
