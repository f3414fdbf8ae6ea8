//go:build !linux

package l3

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// Outside Linux, block files are *os.File (osfile_linux.go has the raw descriptors, whose system
// calls are Linux's): they offer neither vectorReader nor vectorWriter, so the Store reads and
// writes them with plain reads and writes and touches them by path.

func createTemp(dir, pattern string) (TempFile, error) { return os.CreateTemp(dir, pattern) }
func sameFile(a, b fs.FileInfo) bool                   { return os.SameFile(a, b) }

// openRegular opens path for reading if it is a regular file (or a symbolic link to one), without
// blocking on whatever else it may be (regular.go says why), as osfile_linux.go's does; the file is
// returned in blocking mode, as os.Open gives it.
func openRegular(path string) (ReadFile, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		if info, serr := os.Stat(path); serr == nil && !info.Mode().IsRegular() {
			return nil, nil, &notRegularError{path: path, info: info}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err == nil && !info.Mode().IsRegular() {
		err = &notRegularError{path: path, info: info}
	}
	if err == nil {
		err = setBlocking(f)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// setBlocking clears the O_NONBLOCK that openRegular opened f with.
func setBlocking(f *os.File) error {
	raw, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var setErr error
	if err := raw.Control(func(fd uintptr) { setErr = syscall.SetNonblock(int(fd), false) }); err != nil {
		return err
	}
	return setErr
}
