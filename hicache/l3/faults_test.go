package l3

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// faultyFile is a temporary file on a filesystem that fills up after roomBytes, or whose fsync
// fails.
type faultyFile struct {
	*os.File
	roomBytes int
	syncErr   error
}

func (f *faultyFile) Write(b []byte) (int, error) {
	if len(b) > f.roomBytes {
		n, _ := f.File.Write(b[:f.roomBytes])
		f.roomBytes = 0
		return n, syscall.ENOSPC
	}
	f.roomBytes -= len(b)
	return f.File.Write(b)
}

func (f *faultyFile) Sync() error {
	if f.syncErr != nil {
		return f.syncErr
	}
	return f.File.Sync()
}

// TestFailedWriteLeavesNothing: a full filesystem (in the header or in the payload) or a failing
// fsync is a *WriteError that names its cause, and leaves neither a temporary file nor a block; the
// store goes on.
func TestFailedWriteLeavesNothing(t *testing.T) {
	for _, tc := range []struct {
		name      string
		roomBytes int
		syncErr   error
		cause     error
	}{{"full in the header", 10, nil, syscall.ENOSPC}, {"full in the payload", headerBytes + 100, nil, syscall.ENOSPC},
		{"fsync fails", 1 << 20, syscall.EIO, syscall.EIO}} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
			s.createTemp = func(dir, pattern string) (TempFile, error) {
				f, err := os.CreateTemp(dir, pattern)
				return &faultyFile{File: f, roomBytes: tc.roomBytes, syncErr: tc.syncErr}, err
			}
			err := s.Write(8, pageTokens, content(8, 0, pageTokens), true)
			var we *WriteError
			if !errors.As(err, &we) || !errors.Is(err, tc.cause) {
				t.Fatalf("Write: %v, want a WriteError caused by %v", err, tc.cause)
			}
			if tmp, blk := filesUnder(t, s.dir, ".tmp"), filesUnder(t, s.dir, ".blk"); len(
				tmp,
			)+len(
				blk,
			) != 0 {
				t.Errorf("left behind: %v %v", tmp, blk)
			}
			if s.Exists(8) || s.UsedBytes() != 0 {
				t.Error("a failed write counts as a block")
			}
			s.createTemp = OSFS{}.CreateTemp // the disk has room again
			mustWrite(t, s, 8)
		})
	}
}

// TestKilledWriterPublishesNothing: a writer killed before its rename leaves a temporary file
// holding part of a block. Nobody reads it as the block: not Read, not Exists, not Usage, not the
// next Open, which removes it once stale.
func TestKilledWriterPublishesNothing(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, testNS, 1<<20, nil)
	h := header{
		fingerprint:  s.fingerprint,
		key:          6,
		tokenCount:   pageTokens,
		payloadBytes: uint64(testNS.PayloadBytes(pageTokens)),
	}
	path := s.blockPath(6)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".12345.tmp")
	if err := os.WriteFile(tmp, append(h.encode(), content(6, 0, 1)...), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Read(6, make([]byte, 1<<10)); !errors.As(err, new(*MissError)) || s.Exists(6) {
		t.Errorf("Read of a block whose writer died: %v, want a miss", err)
	}
	if u, err := Usage(dir); err != nil || len(u) != 1 || u[0].Blocks != 0 ||
		u[0].TemporaryFiles != 1 {
		t.Errorf("Usage: %+v, %v; want no block and one temporary file", u, err)
	}
	old := s.now().Add(-2 * staleTempAge)
	if err := os.Chtimes(tmp, old, old); err != nil {
		t.Fatal(err)
	}
	if next := openStore(t, dir, testNS, 1<<20, nil); next.Exists(6) || next.UsedBytes() != 0 {
		t.Error("the next job sees the dead writer's block")
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file survived Open: %v", err)
	}
}
