package l3

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// FS is the filesystem a Store keeps its blocks on: the operating system's (OSFS), or one that a
// test or the simulator wraps to fail, delay or corrupt chosen operations (MemFS), as pebble's vfs
// and errorfs do. Paths are the operating system's; every method behaves as its os counterpart, but
// OpenRegular, which opens only a regular file and never blocks on anything else.
type FS interface {
	Stat(path string) (fs.FileInfo, error)
	OpenRegular(path string) (ReadFile, fs.FileInfo, error)
	CreateTemp(dir, pattern string) (TempFile, error)
	Rename(oldPath, newPath string) error
	Chtimes(path string, atime, mtime time.Time) error
	Remove(path string) error
	MkdirAll(path string, perm fs.FileMode) error
	ReadDir(path string) ([]fs.DirEntry, error)
	SyncDir(path string) error
	SameFile(a, b fs.FileInfo) bool
}

// ReadFile is a file open for reading.
type ReadFile interface {
	io.Reader
	Stat() (fs.FileInfo, error)
	Close() error
}

// TempFile is what Write needs of a file it creates.
type TempFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// OSFS is the operating system's filesystem.
type OSFS struct{}

func (OSFS) Stat(path string) (fs.FileInfo, error) { return os.Stat(path) }

func (OSFS) CreateTemp(
	dir, pattern string,
) (TempFile, error) {
	return createTemp(dir, pattern)
}

func (OSFS) Rename(
	oldPath, newPath string,
) error {
	return os.Rename(oldPath, newPath)
}

func (OSFS) Chtimes(
	path string,
	atime, mtime time.Time,
) error {
	return os.Chtimes(path, atime, mtime)
}
func (OSFS) Remove(path string) error { return os.Remove(path) }

func (OSFS) MkdirAll(
	path string,
	perm fs.FileMode,
) error {
	return os.MkdirAll(path, perm)
}
func (OSFS) ReadDir(path string) ([]fs.DirEntry, error)             { return os.ReadDir(path) }
func (OSFS) SameFile(a, b fs.FileInfo) bool                         { return sameFile(a, b) }
func (OSFS) OpenRegular(path string) (ReadFile, fs.FileInfo, error) { return openRegular(path) }

// SyncDir fsyncs a directory, so that a rename in it survives a crash.
func (OSFS) SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// vectorReader and vectorWriter are what a block file offers beyond ReadFile and TempFile when it
// is the operating system's (osFile); the Store's fast paths ask for them. Their methods are
// unexported, so that a wrapper of *os.File (a test's faulty file) never offers them by accident
// and keeps its faults on the path.
type vectorReader interface {
	readv(
		bufs [][]byte,
	) (int, error) // reads into bufs in order, as one read system call does: maybe short
	touch(t time.Time) error // sets the open file's modification and access times
}

type vectorWriter interface {
	pwritev(bufs [][]byte, offset int64) error // writes every byte of bufs at offset, in order
	touch(t time.Time) error
}

// ReadOnlyFS is fsys with every change refused as a read-only mount refuses it (EROFS), reads
// passed through: a test's stand-in for a read-only mount, which root (the tests' user) cannot
// otherwise make of a directory.
type ReadOnlyFS struct{ FS }

func (ReadOnlyFS) CreateTemp(dir, _ string) (TempFile, error) { return nil, readOnly("open", dir) }
func (ReadOnlyFS) Rename(oldPath, _ string) error             { return readOnly("rename", oldPath) }
func (ReadOnlyFS) Chtimes(path string, _, _ time.Time) error  { return readOnly("chtimes", path) }
func (ReadOnlyFS) Remove(path string) error                   { return readOnly("remove", path) }
func (r ReadOnlyFS) MkdirAll(path string, _ fs.FileMode) error {
	if info, err := r.FS.Stat(path); err == nil && info.IsDir() {
		return nil // as os.MkdirAll: a directory that is there is no change
	}
	return readOnly("mkdir", path)
}

func readOnly(
	op, path string,
) error {
	return &fs.PathError{Op: op, Path: path, Err: syscall.EROFS}
}
