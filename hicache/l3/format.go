package l3

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cespare/xxhash/v2"
	"github.com/zeebo/xxh3"
)

// sumChunkBytes is the piece of a payload its checksum hashes at a time.
const sumChunkBytes = 256 << 10

// payloadSum is a block payload's checksum (header bytes 48..55): XXH3-64 of the XXH3-64s of its
// 256 KiB pieces, in order, as little-endian words. Pieces let a reader hash each one just after
// reading it, while it is still in the CPU's cache: a verified read then passes over memory once,
// as a plain read does (hashing a 16 MiB block read whole is a second pass from memory: about 0.65x
// of a plain read here).
func payloadSum(payload []byte) uint64 {
	var s chunkSums
	s.add(payload)
	return s.sum()
}

// chunkSums accumulates the pieces' hashes. add takes bytes that begin a piece, cut into pieces of
// sumChunkBytes (the last one may be shorter only at the payload's end).
type chunkSums struct {
	words []byte
}

func (s *chunkSums) add(b []byte) {
	for off := 0; off < len(b); off += sumChunkBytes {
		s.words = binary.LittleEndian.AppendUint64(
			s.words,
			xxh3.Hash(b[off:min(off+sumChunkBytes, len(b))]),
		)
	}
}

func (s *chunkSums) sum() uint64 { return xxh3.Hash(s.words) }

// A block file is a 64-byte header followed by the payload. Every header word is little-endian:
//
//	offset  size  field
//	 0       8    magic "CPHIL3BK"
//	 8       4    format version (2)
//	12       4    header size in bytes (64)
//	16       8    namespace fingerprint
//	24       8    key
//	32       8    token count
//	40       8    payload length in bytes
//	48       8    XXH3-64 of the payload
//	56       8    xxhash64 of bytes 0..55
//
// The header's own checksum makes every header field self-checking, including the ones the reader
// cannot compare with an expected value. Version 1 checked the payload with xxhash64, which runs no
// faster than the page-cache copy of a read, so a verified read cost two passes (bench l3: 0.4-0.5x
// of a plain read); XXH3, the same family's newer 64-bit hash, runs several times faster. A
// version-1 block is a corrupt block to this reader: counted, removed, a miss.
const (
	headerBytes   = 64
	formatVersion = 2
	magic         = "CPHIL3BK"
)

type header struct {
	fingerprint, key uint64
	tokenCount       uint64
	payloadBytes     uint64
	payloadSum       uint64
}

func (h header) encode() []byte {
	b := make([]byte, headerBytes)
	copy(b, magic)
	binary.LittleEndian.PutUint32(b[8:], formatVersion)
	binary.LittleEndian.PutUint32(b[12:], headerBytes)
	for i, v := range []uint64{h.fingerprint, h.key, h.tokenCount, h.payloadBytes, h.payloadSum} {
		binary.LittleEndian.PutUint64(b[16+8*i:], v)
	}
	binary.LittleEndian.PutUint64(b[56:], xxhash.Sum64(b[:56]))
	return b
}

// parseHeader checks what a header can say about itself (magic, version, size, its checksum); the
// caller checks the fields against what it expects (checkHeader). The reason is a *CorruptError's.
func parseHeader(b []byte) (header, string) {
	switch {
	case len(b) < headerBytes:
		return header{}, fmt.Sprintf("short header: %d of %d bytes", len(b), headerBytes)
	case string(b[:8]) != magic:
		return header{}, fmt.Sprintf("wrong magic %q", b[:8])
	case binary.LittleEndian.Uint32(b[8:]) != formatVersion:
		return header{}, fmt.Sprintf(
			"format version %d, want %d",
			binary.LittleEndian.Uint32(b[8:]),
			formatVersion,
		)
	case binary.LittleEndian.Uint32(b[12:]) != headerBytes:
		return header{}, fmt.Sprintf(
			"header size %d, want %d",
			binary.LittleEndian.Uint32(b[12:]),
			headerBytes,
		)
	case binary.LittleEndian.Uint64(b[56:]) != xxhash.Sum64(b[:56]):
		return header{}, "header checksum mismatch"
	}
	w := func(i int) uint64 { return binary.LittleEndian.Uint64(b[16+8*i:]) }
	return header{
		fingerprint:  w(0),
		key:          w(1),
		tokenCount:   w(2),
		payloadBytes: w(3),
		payloadSum:   w(4),
	}, ""
}

// checkHeader compares a parsed header with the block the reader asked for, in its namespace.
func checkHeader(h header, ns Namespace, fingerprint, key uint64) string {
	switch {
	case h.fingerprint != fingerprint:
		return fmt.Sprintf("namespace %016x, want %016x", h.fingerprint, fingerprint)
	case h.key != key:
		return fmt.Sprintf("key %016x, want %016x", h.key, key)
	case h.tokenCount == 0 || h.tokenCount%uint64(ns.PageTokens) != 0 || h.tokenCount > 1<<31:
		return fmt.Sprintf("token count %d is not whole pages of %d", h.tokenCount, ns.PageTokens)
	case h.payloadBytes != uint64(ns.PayloadBytes(int(h.tokenCount))):
		return fmt.Sprintf(
			"payload %d bytes, want %d for %d tokens",
			h.payloadBytes,
			ns.PayloadBytes(int(h.tokenCount)),
			h.tokenCount,
		)
	}
	return ""
}

// CorruptError is a block file that cannot be trusted: a wrong header, a short or long file, a
// checksum that does not match, a path that is not a regular file (a FIFO, a directory, a socket, a
// device). Read has already removed it; the caller's policy is to count it and treat it as a miss.
type CorruptError struct {
	Path   string
	Key    uint64
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("l3: corrupt block %016x (%s): %s", e.Key, e.Path, e.Reason)
}

// MissError is a block that is not there: never written, or evicted (by this job or another sharing
// the directory) between Exists and Read. It is a miss, never a failure.
type MissError struct{ Key uint64 }

func (e *MissError) Error() string { return fmt.Sprintf("l3: block %016x not present", e.Key) }

// WriteError is a block that could not be stored (ENOSPC, EIO, ...): nothing was published and the
// temporary file is gone. Op names the step that failed; errors.Is(err, syscall.ENOSPC) sees the
// cause.
type WriteError struct {
	Path string
	Op   string
	Err  error
}

func (e *WriteError) Error() string { return fmt.Sprintf("l3: write %s: %s: %v", e.Path, e.Op, e.Err) }
func (e *WriteError) Unwrap() error { return e.Err }

// IsMiss says whether err is one the caller serves as a miss: the block is absent or was corrupt.
func IsMiss(err error) bool {
	var miss *MissError
	var corrupt *CorruptError
	return errors.As(err, &miss) || errors.As(err, &corrupt)
}

// VerifyFile checks one block file on its own, without its namespace: a whole, self-consistent
// header, the length it gives, and the payload's checksum. It is what a torn or partly written
// block fails, for a test or a tool that looks at every file a killed job left (a job's own reads
// check the same, and the namespace too, but only of the blocks it asks for). The error is a
// *CorruptError, or the file's I/O error.
func VerifyFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	corrupt := func(reason string) error { return &CorruptError{Path: path, Reason: reason} }
	h, reason := parseHeader(b)
	if reason != "" {
		return corrupt(reason)
	}
	if want := uint64(headerBytes) + h.payloadBytes; uint64(len(b)) != want {
		return corrupt(
			fmt.Sprintf(
				"file of %d bytes, want %d (the header and a payload of %d)",
				len(b),
				want,
				h.payloadBytes,
			),
		)
	}
	if payloadSum(b[headerBytes:]) != h.payloadSum {
		return corrupt("payload checksum mismatch")
	}
	return nil
}

// brokenBlock is what the store panics with on a broken invariant of a block it made or placed
// (DESIGN.md, "Asserts"): not a corrupt file, which is a *CorruptError and a miss, but this
// process's own arithmetic gone wrong (a header it wrote that it would not read back, a part
// outside its block or slab). It names the invariant and dumps what it checked: the block's header
// and the namespace it was laid out for.
func brokenBlock(h header, ns Namespace, format string, args ...any) string {
	return "l3: broken invariant: " + fmt.Sprintf(format, args...) + fmt.Sprintf(
		"\nblock %016x: namespace %016x, %d tokens, payload %d bytes (sum %016x)\nnamespace: %s\n",
		h.key, h.fingerprint, h.tokenCount, h.payloadBytes, h.payloadSum, ns)
}
