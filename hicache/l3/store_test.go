package l3

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/internal/errscope"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, testNS, 1<<20, nil)
	key := l3block.ChainKey(
		l3block.ChainKey(0, []int32{1, 2, 3, 4}),
		[]int32{5, 6, 7, 8, 9, 10, 11, 12},
	)
	want := content(key, 7, 2*pageTokens)
	if err := s.Write(key, 2*pageTokens, want, true); err != nil {
		t.Fatal(err)
	}
	if !s.Exists(key) {
		t.Fatal("Exists after Write: false")
	}
	got := make([]byte, len(want)+10)
	tokens, err := s.Read(key, got)
	if err != nil || tokens != 2*pageTokens || !bytes.Equal(got[:len(want)], want) {
		t.Fatalf(
			"Read: %d tokens, %v; bytes equal %v",
			tokens,
			err,
			bytes.Equal(got[:len(want)], want),
		)
	}
	name := filepath.Join(dir, hex16(testNS.Fingerprint()), hex16(key)[:2], hex16(key)+".blk")
	if info, err := os.Stat(name); err != nil || info.Size() != headerBytes+int64(len(want)) {
		t.Fatalf("block file %s: %v", name, err)
	}
	if _, err := s.Read(key, got[:len(want)-1]); err == nil || IsMiss(err) {
		t.Errorf("a buffer too small: %v, want a plain error", err)
	}
	if !s.Exists(key) {
		t.Error("a buffer too small removed the block")
	}
	if c := s.Counters(); c.Writes != 1 || c.Hits != 1 || c.Corrupt != 0 {
		t.Errorf("counters %+v", c)
	}
}

func TestWriteRefusesPartialPages(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
	if err := s.Write(1, pageTokens+1, content(1, 0, pageTokens+1), false); err == nil {
		t.Error("a block of 5 tokens at 4 a page was written")
	}
	if err := s.Write(1, pageTokens, content(1, 0, 2*pageTokens), false); err == nil {
		t.Error("a payload of the wrong size was written")
	}
}

// TestEveryFlippedByteIsCorrupt: every byte of the file, header and payload, changed alone, is
// found; the file is removed and counted; the next read is a miss.
func TestEveryFlippedByteIsCorrupt(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
	buf := make([]byte, testNS.PayloadBytes(pageTokens))
	for i := 0; i < int(blockFileBytes); i++ {
		mustWrite(t, s, 42)
		path := s.blockPath(42)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		b[i] ^= 0xff
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = s.Read(42, buf)
		var ce *CorruptError
		if !errors.As(err, &ce) || !IsMiss(err) {
			t.Fatalf("byte %d flipped: %v, want a CorruptError", i, err)
		}
		if _, err := os.Stat(path); !os.IsNotExist(err) {
			t.Fatalf("byte %d flipped: the corrupt file is still there (%v)", i, err)
		}
		if _, err := s.Read(42, buf); !errors.As(err, new(*MissError)) {
			t.Fatalf("byte %d: the read after a corrupt one: %v, want a miss", i, err)
		}
	}
	if c := s.Counters(); c.Corrupt != blockFileBytes {
		t.Errorf("%d corrupt blocks counted, want %d", c.Corrupt, blockFileBytes)
	}
}

func TestTruncatedOrLongBlockIsCorrupt(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
	buf := make([]byte, testNS.PayloadBytes(pageTokens))
	for _, size := range []int64{
		0, 1, headerBytes - 1, headerBytes, headerBytes + 1, blockFileBytes - 1, blockFileBytes + 1,
	} {
		mustWrite(t, s, 9)
		if err := os.Truncate(s.blockPath(9), size); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Read(9, buf); !errors.As(err, new(*CorruptError)) {
			t.Errorf("a block file of %d bytes: %v, want a CorruptError", size, err)
		}
		if s.Exists(9) {
			t.Errorf("a block file of %d bytes was not removed", size)
		}
	}
}

func TestAbsentBlockIsAMiss(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
	if s.Exists(5) {
		t.Error("Exists on an empty store")
	}
	mustWrite(t, s, 5)
	if err := os.Remove(s.blockPath(5)); err != nil { // another job evicted it after Exists
		t.Fatal(err)
	}
	_, err := s.Read(5, make([]byte, 1<<10))
	var miss *MissError
	if !errors.As(err, &miss) || miss.Key != 5 || !IsMiss(err) {
		t.Errorf("Read of a removed block: %v, want a MissError", err)
	}
	if c := s.Counters(); c.Misses != 1 || s.UsedBytes() != 0 {
		t.Errorf("after the miss: %+v, %d bytes known", c, s.UsedBytes())
	}
}

// TestNamespacesNeverShareBlocks: each field of the namespace, changed alone, changes the
// fingerprint, and a store of that namespace sees none of the other's blocks, even a block file
// copied under its own path.
func TestNamespacesNeverShareBlocks(t *testing.T) {
	dir := t.TempDir()
	a := openStore(t, dir, testNS, 1<<20, nil)
	mustWrite(t, a, 3)
	variants := []func(*Namespace){
		func(n *Namespace) { n.Layers++ }, func(n *Namespace) { n.Payloads++ },
		func(n *Namespace) { n.PageTokens *= 2 },
		func(n *Namespace) { n.TokenBytes += 8 }, func(n *Namespace) { n.CPSize++ },
		func(n *Namespace) { n.ContentSeed++ },
		func(n *Namespace) { n.Content++ }, func(n *Namespace) { n.Name += "x" },
	}
	seen := map[uint64]bool{testNS.Fingerprint(): true}
	for i, change := range variants {
		ns := testNS
		change(&ns)
		if seen[ns.Fingerprint()] {
			t.Fatalf("variant %d (%s) has a fingerprint already seen", i, ns)
		}
		seen[ns.Fingerprint()] = true
		b := openStore(t, dir, ns, 1<<20, nil)
		if b.Exists(3) {
			t.Errorf("variant %d (%s) sees the block", i, ns)
		}
		if err := os.MkdirAll(filepath.Dir(b.blockPath(3)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(a.blockPath(3), b.blockPath(3)); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Read(3, make([]byte, 1<<12)); !errors.As(err, new(*CorruptError)) {
			t.Errorf("variant %d read the other namespace's block file: %v", i, err)
		}
	}
	if !a.Exists(3) {
		t.Error("the original block is gone")
	}
}

// TestFingerprintIsStable: the fingerprint is part of every path and header, so a change to its
// encoding must be deliberate (bump fingerprintVersion and this value).
func TestFingerprintIsStable(t *testing.T) {
	if got, want := testNS.Fingerprint(), uint64(fingerprintGolden); got != want {
		t.Errorf("fingerprint %016x, want %016x", got, want)
	}
}

func TestOpenNamesTheFlag(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		dir      string
		capacity int64
		flag     string
	}{{"", 1, "l3-dir"}, {"/no/such/l3", 1, "l3-dir"}, {file, 1, "l3-dir"}, {t.TempDir(), 0, "l3-bytes"}}
	for _, tc := range cases {
		_, err := Open(tc.dir, testNS, tc.capacity)
		var ce *errscope.ConfigError
		if !errors.As(err, &ce) || ce.Flag != tc.flag {
			t.Errorf("Open(%q, %d): %v, want an invalid --%s", tc.dir, tc.capacity, err, tc.flag)
		}
	}
}

// TestReadOnlyDirectoryServesItsBlocks: a directory that refuses writes (a read-only mount holding
// a pre-warmed cache; ReadOnlyFS stands for it, since root writes anywhere) opens read-only,
// whether or not its namespace is there yet: its blocks are read, a write is skipped (ErrReadOnly),
// and a corrupt block, which cannot be removed, is still refused.
func TestReadOnlyDirectoryServesItsBlocks(t *testing.T) {
	dir := t.TempDir()
	warm := openStore(t, dir, testNS, 1<<20, nil)
	want := content(1, 7, pageTokens)
	if err := warm.Write(1, pageTokens, want, false); err != nil {
		t.Fatal(err)
	}
	if err := warm.Write(2, pageTokens, content(2, 7, pageTokens), false); err != nil {
		t.Fatal(err)
	}
	path := warm.BlockPath(2)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[headerBytes] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	other := testNS
	other.Name = "never written"
	for _, ns := range []Namespace{testNS, other} {
		s, err := OpenPart(ReadOnlyFS{OSFS{}}, dir, ns, 0, 1<<20)
		if err != nil || !s.ReadOnly() {
			t.Fatalf(
				"%s: read-only %v, %v: want it opened read-only",
				ns,
				s != nil && s.ReadOnly(),
				err,
			)
		}
		if err := s.Write(3, pageTokens, content(3, 7, pageTokens), false); !errors.Is(
			err,
			ErrReadOnly,
		) {
			t.Errorf("%s: write: %v, want ErrReadOnly", ns, err)
		}
		if ns != testNS {
			continue
		}
		got := make([]byte, len(want))
		if n, err := s.Read(1, got); err != nil || n != pageTokens || !bytes.Equal(got, want) {
			t.Errorf("read of a warm block: %d tokens, %v", n, err)
		}
		var corrupt *CorruptError
		if _, err := s.Read(2, got); !errors.As(err, &corrupt) {
			t.Errorf("read of a corrupt block: %v, want a *CorruptError", err)
		}
	}
}

// TestUnboundedStoreSkipsTheScan: a Store that never evicts (a job's non-keeper ranks) does not
// scan the directory at start, yet reads every block; a bounded one seeds its LRU from the same
// blocks.
func TestUnboundedStoreSkipsTheScan(t *testing.T) {
	dir := t.TempDir()
	w := openStore(t, dir, testNS, 1<<20, nil)
	for k := uint64(1); k <= 5; k++ {
		mustWrite(t, w, k)
	}
	reader := openStore(t, dir, testNS, Unbounded, nil)
	if used := reader.UsedBytes(); used != 0 {
		t.Errorf("an unbounded Store knows %d bytes at start: it scanned the directory", used)
	}
	buf := make([]byte, testNS.PayloadBytes(pageTokens))
	for k := uint64(1); k <= 5; k++ {
		if _, err := reader.Read(k, buf); err != nil {
			t.Errorf("block %d: %v", k, err)
		}
	}
	if used := openStore(t, dir, testNS, 1<<20, nil).UsedBytes(); used != 5*blockFileBytes {
		t.Errorf("a bounded Store seeded %d bytes, want %d", used, 5*blockFileBytes)
	}
}

// TestBlockPathLayout: the path built by hand is DIR/<fingerprint>/<key hex[0:2]>/<key hex>.blk,
// the layout DESIGN.md documents and other jobs' stores read.
func TestBlockPathLayout(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
	for _, key := range []uint64{0, 1, 0xab, 0x0123456789abcdef, ^uint64(0)} {
		name := fmt.Sprintf("%016x", key)
		if got, want := s.blockPath(key), filepath.Join(s.dir, name[:2], name+".blk"); got != want {
			t.Errorf("key %#x: %s, want %s", key, got, want)
		}
	}
}
