package l3

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testNS is a small geometry: 4 tokens a page, 64 bytes a token over every rank, layer and payload.
var testNS = Namespace{
	Layers:      2,
	Payloads:    2,
	PageTokens:  4,
	TokenBytes:  8,
	CPSize:      2,
	ContentSeed: 1,
	Name:        "test-model bf16",
}

const pageTokens = 4

// blockFileBytes is one page's block file.
var blockFileBytes = headerBytes + testNS.PayloadBytes(pageTokens)

// content is a block's payload, a function of its key and a version, so a reader can tell whose
// bytes it got.
func content(key uint64, version byte, tokens int) []byte {
	b := make([]byte, testNS.PayloadBytes(tokens))
	for i := range b {
		b[i] = byte(key>>(8*(i%8))) ^ byte(i) ^ version
	}
	return b
}

// fakeClock advances a second at every call, so that every use has its own time on any filesystem.
// Stores that share one see one order.
func fakeClock() func() time.Time {
	var n atomic.Int64
	start := time.Now().Add(-time.Hour).Truncate(time.Second)
	return func() time.Time { return start.Add(time.Duration(n.Add(1)) * time.Second) }
}

func openStore(
	t *testing.T,
	dir string,
	ns Namespace,
	capacityBytes int64,
	clock func() time.Time,
) *Store {
	t.Helper()
	s, err := Open(dir, ns, capacityBytes)
	if err != nil {
		t.Fatal(err)
	}
	if clock != nil {
		s.now = clock
	}
	return s
}

func mustWrite(t *testing.T, s *Store, key uint64) {
	t.Helper()
	if err := s.Write(key, pageTokens, content(key, 0, pageTokens), false); err != nil {
		t.Fatal(err)
	}
}

// filesUnder lists the regular files under dir whose names end in suffix.
func filesUnder(t *testing.T, dir, suffix string) []string {
	t.Helper()
	var out []string
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() && strings.HasSuffix(path, suffix) {
			out = append(out, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hex16(v uint64) string { return fmt.Sprintf("%016x", v) }

// fingerprintGolden is testNS's fingerprint under fingerprintVersion 2.
const fingerprintGolden = 0x2e740ea3b2376362
