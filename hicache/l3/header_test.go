package l3

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"
)

func TestHeaderRoundTrip(t *testing.T) {
	h := header{fingerprint: 1, key: 2, tokenCount: 3, payloadBytes: 4, payloadSum: 5}
	got, reason := parseHeader(h.encode())
	if reason != "" || got != h {
		t.Errorf("parsed %+v (%s), want %+v", got, reason, h)
	}
}

// FuzzParseHeader: the parser never panics on any bytes, and what it accepts is exactly what encode
// writes, so no two byte strings parse to the same header.
func FuzzParseHeader(f *testing.F) {
	f.Add(
		header{
			fingerprint:  testNS.Fingerprint(),
			key:          9,
			tokenCount:   4,
			payloadBytes: 256,
			payloadSum:   1,
		}.encode(),
	)
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

// TestChunkedPayloadSumEqualsWhole: a verified read hashes the payload piece by piece as it
// arrives; the sum must be the writer's, computed over the whole payload, at every size around the
// piece and read boundaries.
func TestChunkedPayloadSumEqualsWhole(t *testing.T) {
	for _, size := range []int{
		1,
		63,
		sumChunkBytes - 1,
		sumChunkBytes,
		sumChunkBytes + 1,
		readChunkBytes + 17,
		3*readChunkBytes - 8,
	} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i*7 + i>>9)
		}
		sum, n, err := readSummed(bytes.NewReader(payload), make([]byte, size), 0)
		if err != nil || n != size || sum != payloadSum(payload) {
			t.Errorf(
				"%d bytes: sum %016x, n %d, err %v; whole %016x",
				size,
				sum,
				n,
				err,
				payloadSum(payload),
			)
		}
		payload[size/2] ^= 1
		if payloadSum(payload) == sum {
			t.Errorf("%d bytes: a flipped bit leaves the sum unchanged", size)
		}
	}
}

// TestVerifyFileRefusesEveryTornBlock: VerifyFile passes a block Write published and refuses it cut
// short at any point, with a byte of its payload or of its header changed, and a file that is not
// there.
func TestVerifyFileRefusesEveryTornBlock(t *testing.T) {
	s, tokens := benchStore(t, 3*sumChunkBytes/2, false)
	payload := make([]byte, 3*sumChunkBytes/2)
	for i := range payload {
		payload[i] = byte(i * 31)
	}
	if err := s.Write(9, tokens, payload, false); err != nil {
		t.Fatal(err)
	}
	path := s.BlockPath(9)
	if err := VerifyFile(path); err != nil {
		t.Fatalf("a published block: %v", err)
	}
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string][]byte{
		"empty":          {},
		"header only":    whole[:headerBytes],
		"one byte short": whole[:len(whole)-1],
	}
	for _, at := range []int{20, headerBytes, headerBytes + sumChunkBytes + 5, len(whole) - 1} {
		b := bytes.Clone(whole)
		b[at] ^= 1
		bad[fmt.Sprintf("byte %d changed", at)] = b
	}
	for name, b := range bad {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		var corrupt *CorruptError
		if err := VerifyFile(path); !errors.As(err, &corrupt) {
			t.Errorf("%s: %v, want a *CorruptError", name, err)
		}
	}
	if err := VerifyFile(path + ".gone"); err == nil {
		t.Error("a missing file verified")
	}
}
