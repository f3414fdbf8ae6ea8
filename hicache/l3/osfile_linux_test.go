package l3

import (
	"bytes"
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestVectoredBlockFilesAcrossChunks: on the operating system's filesystem a block is written with
// pwritev (one call with its header when it fits a read chunk, else chunk by chunk and the header
// last) and read with one readv of the header and a payload of up to oneReadPayloadBytes, else of
// the header, then chunk by chunk. At every size around the chunk boundaries the file is byte for
// byte what a plain write of the header and the payload makes (MemFS's), it reads back whole, and a
// byte flipped in its first or last chunk is found.
func TestVectoredBlockFilesAcrossChunks(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<40, nil)
	page := int(testNS.PayloadBytes(pageTokens))
	for _, size := range []int{
		page,
		oneReadPayloadBytes,
		oneReadPayloadBytes + page,
		readChunkBytes - page,
		readChunkBytes,
		readChunkBytes + page,
		3*readChunkBytes + page,
	} {
		tokens := size / page * pageTokens
		payload := content(uint64(size), 3, tokens)
		key := uint64(size)
		if err := s.Write(key, tokens, payload, false); err != nil {
			t.Fatal(err)
		}
		file, err := os.ReadFile(s.blockPath(key))
		if err != nil {
			t.Fatal(err)
		}
		h := header{
			fingerprint:  s.fingerprint,
			key:          key,
			tokenCount:   uint64(tokens),
			payloadBytes: uint64(size),
			payloadSum:   payloadSum(payload),
		}
		if !bytes.Equal(file, append(h.encode(), payload...)) {
			t.Fatalf("%d bytes: the file is not the header and the payload", size)
		}
		into := make([]byte, size)
		if got, err := s.Read(key, into); err != nil || got != tokens ||
			!bytes.Equal(into, payload) {
			t.Fatalf(
				"%d bytes: read back %d tokens, %v, equal %v",
				size,
				got,
				err,
				bytes.Equal(into, payload),
			)
		}
		for _, at := range []int{headerBytes, len(file) - 1} {
			flipped := bytes.Clone(file)
			flipped[at] ^= 1
			if err := os.WriteFile(s.blockPath(key), flipped, 0o600); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Read(key, into); !errors.As(err, new(*CorruptError)) {
				t.Errorf("%d bytes, byte %d flipped: %v, want a CorruptError", size, at, err)
			}
		}
	}
}

// TestReadOfAFileThatShrankIsCorrupt: a file shorter than its size when opened (cut meanwhile) is a
// corrupt block, whichever part of it is missing.
func TestReadOfAFileThatShrankIsCorrupt(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
	payload := content(5, 0, pageTokens)
	h := header{
		fingerprint:  s.fingerprint,
		key:          5,
		tokenCount:   pageTokens,
		payloadBytes: uint64(len(payload)),
		payloadSum:   payloadSum(payload),
	}
	file := append(h.encode(), payload...)
	for _, cut := range []int{0, headerBytes - 1, headerBytes, len(file) - 1} {
		f := &memReader{r: bytes.NewReader(file[:cut]), m: NewMemFS()}
		_, err := s.readVerified(f, int64(len(file)), "p", 5, make([]byte, len(payload)))
		if !errors.As(err, new(*CorruptError)) {
			t.Errorf(
				"a file of %d bytes, %d when opened: %v, want a CorruptError",
				cut,
				len(file),
				err,
			)
		}
	}
}

// TestReadClearsNonblockOnEAGAIN: a descriptor opened O_NONBLOCK (as openRegular opens a block)
// that answers a read with EAGAIN is made blocking and read again, not failed: here a pipe whose
// writer writes later.
func TestReadClearsNonblockOnEAGAIN(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fd, err := syscall.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		t.Fatal(err)
	}
	f := &osFile{fd: fd, path: "pipe", nonblock: true}
	defer f.Close()
	go func() {
		time.Sleep(20 * time.Millisecond)
		w.Write([]byte("x"))
	}()
	b := make([]byte, 1)
	if n, err := f.Read(b); err != nil || n != 1 || b[0] != 'x' || f.nonblock {
		t.Errorf(
			"read %d bytes %q, %v, still nonblocking %v; want the writer's byte",
			n,
			b[:n],
			err,
			f.nonblock,
		)
	}
}
