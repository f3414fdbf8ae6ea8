package l3

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
	"time"
)

// FS is the filesystem a Store keeps its blocks on: the operating system's (OSFS), or one that a test or the
// simulator wraps to fail, delay or corrupt chosen operations (MemFS), as pebble's vfs and errorfs do. Paths are
// the operating system's; every method behaves as its os counterpart, but OpenRegular, which opens only a
// regular file and never blocks on anything else.
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

func (OSFS) Stat(path string) (fs.FileInfo, error)                  { return os.Stat(path) }
func (OSFS) CreateTemp(dir, pattern string) (TempFile, error)       { return createTemp(dir, pattern) }
func (OSFS) Rename(oldPath, newPath string) error                   { return os.Rename(oldPath, newPath) }
func (OSFS) Chtimes(path string, atime, mtime time.Time) error      { return os.Chtimes(path, atime, mtime) }
func (OSFS) Remove(path string) error                               { return os.Remove(path) }
func (OSFS) MkdirAll(path string, perm fs.FileMode) error           { return os.MkdirAll(path, perm) }
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

// openRegular opens path for reading if it is a regular file (or a symbolic link to one), without blocking on
// whatever else it may be (regular.go says why). The error is fs.ErrNotExist's when there is nothing at path, a
// *notRegularError when there is something else (a socket cannot be opened at all, ENXIO: a stat says what it
// is), or the open's. The file is an osFile, still O_NONBLOCK: Linux ignores the flag on a regular file, and a
// filesystem that honoured it would answer a read with EAGAIN, which the osFile meets by clearing the flag.
func openRegular(path string) (ReadFile, fs.FileInfo, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	}
	if err != nil {
		if err != syscall.ENOENT {
			if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
				return nil, nil, &notRegularError{path: path, info: info}
			}
		}
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := &osFile{fd: fd, path: path, nonblock: true}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &notRegularError{path: path, info: info}
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}
