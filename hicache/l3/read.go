package l3

import (
	"fmt"
	"io"
)

// A block read: the header and the payload checked against their sums and the namespace as they stream in, and a
// block that fails any check counted corrupt and removed, never served.

// readVerified reads and checks the header, the file's length (fileBytes, its size when opened)
// against it, the payload into into, and the checksum. A block of up to oneReadPayloadBytes comes
// in one read system call with its header when the file offers it (an osFile), as a plain read of
// the file does.
func (s *Store) readVerified(
	f ReadFile,
	fileBytes int64,
	path string,
	key uint64,
	into []byte,
) (header, error) {
	corrupt := func(reason string) (header, error) {
		return header{}, &CorruptError{Path: path, Key: key, Reason: reason}
	}
	if fileBytes < headerBytes {
		return corrupt(fmt.Sprintf("short header: %d of %d bytes", fileBytes, headerBytes))
	}
	buf := make([]byte, headerBytes)
	first := into[:0]
	if fileBytes-headerBytes <= oneReadPayloadBytes {
		first = into[:min(int64(len(into)), fileBytes-headerBytes)]
	}
	n, err := readFull(f, buf, first)
	if n < headerBytes+len(first) && (err == io.EOF || err == io.ErrUnexpectedEOF) {
		if n < headerBytes {
			return corrupt(fmt.Sprintf("short header: %d of %d bytes", n, headerBytes))
		}
		return corrupt(
			fmt.Sprintf("short file: %d of the %d bytes it had when opened", n, fileBytes),
		)
	}
	if err != nil {
		return header{}, err
	}
	h, reason := parseHeader(buf)
	if reason == "" {
		reason = checkHeader(h, s.ns, s.fingerprint, key)
	}
	if reason != "" {
		return corrupt(reason)
	}
	if uint64(len(into)) < h.payloadBytes {
		return header{}, fmt.Errorf(
			"l3: read %016x: buffer of %d bytes, the block has %d",
			key,
			len(into),
			h.payloadBytes,
		)
	}
	if want := headerBytes + int64(h.payloadBytes); fileBytes != want {
		return corrupt(
			fmt.Sprintf(
				"file of %d bytes, want %d (the header and a payload of %d)",
				fileBytes,
				want,
				h.payloadBytes,
			),
		)
	}
	sum, n, err := readSummed(f, into[:h.payloadBytes], len(first))
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return corrupt(fmt.Sprintf("short payload: %d of %d bytes", n, h.payloadBytes))
	}
	if err != nil {
		return header{}, err
	}
	if sum != h.payloadSum {
		return corrupt("payload checksum mismatch")
	}
	return h, nil
}

// readFull fills head, then payload, from f: with one readv when f offers it (and more only if that
// one comes back short), else as io.ReadFull of each. n counts the bytes of both.
func readFull(f ReadFile, head, payload []byte) (n int, err error) {
	v, ok := f.(vectorReader)
	if !ok {
		n, err = io.ReadFull(f, head)
		if err != nil {
			return n, err
		}
		got, err := io.ReadFull(f, payload)
		return n + got, err
	}
	bufs := [][]byte{head, payload}
	for want := len(head) + len(payload); n < want; {
		got, err := v.readv(bufs)
		if err != nil {
			return n, err
		}
		if got == 0 {
			return n, io.ErrUnexpectedEOF
		}
		n += got
		for len(bufs) > 0 && got >= len(bufs[0]) {
			got -= len(bufs[0])
			bufs = bufs[1:]
		}
		if len(bufs) > 0 {
			bufs[0] = bufs[0][got:]
		}
	}
	return n, nil
}

// readSummed fills payload from f, after its first have bytes (already read: none, or all of it),
// and returns payloadSum of it, hashing each read chunk's pieces as soon as the chunk is in, while
// it is still in the CPU's cache; n is the bytes of payload filled. (Hashing on a second goroutine,
// one chunk behind, was no faster here: the other core's cache does not hold the chunk, and both
// passes then compete for memory bandwidth.)
func readSummed(f io.Reader, payload []byte, have int) (sum uint64, n int, err error) {
	var sums chunkSums
	sums.add(payload[:have])
	for n = have; n < len(payload); {
		chunk := payload[n:min(n+readChunkBytes, len(payload))]
		got, err := io.ReadFull(f, chunk)
		if err != nil {
			return 0, n + got, err
		}
		sums.add(chunk)
		n += got
	}
	return sums.sum(), n, nil
}
