package l3

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notRegularTimeout bounds each call that must not block: a FIFO's open without the fix never
// returns, and the test must fail rather than hang.
const notRegularTimeout = 10 * time.Second

// withTimeout runs f on a goroutine and fails the test if it has not returned in notRegularTimeout.
// A FIFO that f is stuck opening is then opened for writing, which lets f's open return, so no
// goroutine is left behind.
func withTimeout(t *testing.T, what, fifo string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(notRegularTimeout):
		if w, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close()
		}
		<-done
		t.Fatalf("%s blocked for %v on a path that is not a regular file", what, notRegularTimeout)
	}
}

// mkfifo makes a FIFO at path (removing what is there).
func mkfifo(t *testing.T, path string) {
	t.Helper()
	os.RemoveAll(path)
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// mksocket binds a Unix socket at path (removing what is there) and leaves the socket file when it
// closes. It binds in a short directory and renames the file into place: a socket's path is limited
// to 107 bytes.
func mksocket(t *testing.T, path string) {
	t.Helper()
	short, err := os.MkdirTemp("", "l3s")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(short)
	l, err := net.Listen("unix", filepath.Join(short, "s"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	os.RemoveAll(path)
	if err := os.Rename(filepath.Join(short, "s"), path); err != nil {
		t.Fatal(err)
	}
}

// TestNotRegularBlockIsCorrupt: a block path that is a FIFO, a directory, a socket, or a symbolic
// link to a FIFO is not present to Exists, and Read returns at once with a *CorruptError naming
// what it is, counts it as corrupt and removes it (the link, not what it points to); a block
// written there afterwards is a hit.
func TestNotRegularBlockIsCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name, kind string
		make       func(t *testing.T, path, elsewhere string)
	}{
		{"fifo", "FIFO", func(t *testing.T, path, _ string) { mkfifo(t, path) }},
		{"directory", "a directory", func(t *testing.T, path, _ string) {
			os.Remove(path)
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{"socket", "a socket", func(t *testing.T, path, _ string) { mksocket(t, path) }},
		{"symlink to a fifo", "FIFO", func(t *testing.T, path, elsewhere string) {
			mkfifo(t, elsewhere)
			os.Remove(path)
			if err := os.Symlink(elsewhere, path); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
			mustWrite(t, s, 8)
			path, elsewhere := s.blockPath(8), filepath.Join(t.TempDir(), "fifo")
			tc.make(t, path, elsewhere)
			if s.Exists(8) {
				t.Errorf("Exists: true for %s", tc.name)
			}
			var err error
			withTimeout(
				t,
				"Read",
				path,
				func() { _, err = s.Read(8, make([]byte, testNS.PayloadBytes(pageTokens))) },
			)
			var corrupt *CorruptError
			if !errors.As(err, &corrupt) || !strings.Contains(err.Error(), tc.kind) ||
				!strings.Contains(err.Error(), path) {
				t.Fatalf("Read: %v, want a CorruptError naming %s and %s", err, path, tc.kind)
			}
			if c := s.Counters(); c.Corrupt != 1 || c.Hits != 0 {
				t.Errorf("counters %+v, want 1 corrupt and no hit", c)
			}
			if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s is still there (%v)", path, err)
			}
			if tc.name == "symlink to a fifo" {
				if _, err := os.Lstat(elsewhere); err != nil {
					t.Errorf("the link's target was removed: %v", err)
				}
			}
			mustWrite(t, s, 8)
			if _, err := s.Read(8, make([]byte, testNS.PayloadBytes(pageTokens))); err != nil {
				t.Errorf("Read after a new write: %v", err)
			}
		})
	}
}

// TestNotRegularCorruptReplacedMeanwhile: a non-regular block that a writer replaces between Read's
// open and its removal is the writer's whole block, and stays (removeCorrupt's rule, for the new
// kind of corrupt block).
func TestNotRegularCorruptReplacedMeanwhile(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<20, nil)
	path := s.blockPath(8)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	mkfifo(t, path)
	_, opened, err := openRegular(path)
	var notRegular *notRegularError
	if !errors.As(err, &notRegular) || opened != nil {
		t.Fatalf("openRegular on a FIFO: %v", err)
	}
	mustWrite(t, s, 8) // renamed over the FIFO
	s.removeCorrupt(notRegular.info, path, 8)
	if _, err := s.Read(8, make([]byte, testNS.PayloadBytes(pageTokens))); err != nil {
		t.Errorf("the new block was removed with the FIFO it replaced: %v", err)
	}
}

// TestNotRegularFilesDoNotBlockOpenOrStat: a FIFO in place of namespace.txt or of a block does not
// block Open (which rewrites namespace.txt, and scans the blocks for the LRU) nor Usage (`cphicache
// l3 stat`), which count only regular block files.
func TestNotRegularFilesDoNotBlockOpenOrStat(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, testNS, 1<<20, nil)
	mustWrite(t, s, 8)
	mustWrite(t, s, 9)
	nsFile := filepath.Join(s.dir, namespaceFile)
	mkfifo(t, nsFile)
	mkfifo(t, s.blockPath(9))
	withTimeout(t, "Open", nsFile, func() {
		s2, err := Open(dir, testNS, 1<<20)
		if err != nil {
			t.Errorf("Open: %v", err)
		} else if s2.UsedBytes() != blockFileBytes {
			t.Errorf("Open found %d bytes of blocks, want the one regular block's %d", s2.UsedBytes(), blockFileBytes)
		}
	})
	if info, err := os.Lstat(nsFile); err != nil || !info.Mode().IsRegular() {
		t.Errorf("Open did not rewrite %s: %v", nsFile, err)
	}
	mkfifo(t, nsFile)
	var usage []NamespaceUsage
	var err error
	withTimeout(t, "Usage", nsFile, func() { usage, err = Usage(dir) })
	if err != nil || len(usage) != 1 || usage[0].Blocks != 1 || usage[0].Description != "" {
		t.Errorf(
			"Usage: %+v, %v; want one namespace of one block, without a description",
			usage,
			err,
		)
	}
}
