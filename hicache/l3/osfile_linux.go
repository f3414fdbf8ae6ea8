package l3

import (
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// On Linux the block files are raw descriptors, not *os.File: a regular file is never pollable, yet
// os.Open offers each one to Go's poller (an epoll_ctl that fails), and the O_NONBLOCK open then
// cost two fcntls: three of the ten system calls a 32 KiB verified read made (Go CPU profile of
// BenchmarkRead: system calls 72% of it). The descriptor also lets a read take the header and a
// small payload in one readv, a write put the header and a small payload in one pwritev, and both
// set the modification time through the descriptor (futimens, about 2 us here) rather than by path
// (utimensat, about 4 us). osfile_other.go keeps *os.File elsewhere.

// osFile is a block file open on a raw descriptor.
type osFile struct {
	fd   int
	path string
	// nonblock is set while the descriptor still has the O_NONBLOCK that openRegular opened it
	// with. Linux ignores it on regular files, so it is cleared only if a read answers EAGAIN (a
	// filesystem that honours it).
	nonblock bool
}

func (f *osFile) Name() string { return f.path }
func (f *osFile) Close() error { return wrapErr("close", f.path, syscall.Close(f.fd)) }
func (f *osFile) Sync() error  { return wrapErr("fsync", f.path, syscall.Fsync(f.fd)) }

func (f *osFile) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	n, err := f.retry(func() (int, error) { return syscall.Read(f.fd, b) })
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return n, err
}

func (f *osFile) readv(bufs [][]byte) (int, error) {
	return f.retry(func() (int, error) { return unix.Readv(f.fd, bufs) })
}

// retry runs a read again after EINTR, and after EAGAIN once the descriptor is blocking.
func (f *osFile) retry(read func() (int, error)) (int, error) {
	for {
		n, err := read()
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN && f.nonblock:
			if err := syscall.SetNonblock(f.fd, false); err != nil {
				return 0, wrapErr("fcntl", f.path, err)
			}
			f.nonblock = false
			continue
		case err != nil:
			return 0, wrapErr("read", f.path, err)
		}
		return max(n, 0), nil
	}
}

func (f *osFile) Write(b []byte) (int, error) {
	for done := 0; ; {
		n, err := syscall.Write(f.fd, b[done:])
		if err == syscall.EINTR {
			continue
		}
		done += max(n, 0)
		if err != nil || done == len(b) {
			return done, wrapErr("write", f.path, err)
		}
	}
}

func (f *osFile) pwritev(bufs [][]byte, offset int64) error {
	for len(bufs) > 0 {
		n, err := unix.Pwritev(f.fd, bufs, offset)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return wrapErr("write", f.path, err)
		}
		offset += int64(n)
		for len(bufs) > 0 && n >= len(bufs[0]) { // a short write: go on from where it stopped
			n -= len(bufs[0])
			bufs = bufs[1:]
		}
		if len(bufs) > 0 {
			bufs[0] = bufs[0][n:]
		}
	}
	return nil
}

// touch is futimens(2): utimensat on the descriptor with a NULL path, which x/sys/unix does not
// offer (its Futimes goes through /proc/self/fd, a path again).
func (f *osFile) touch(t time.Time) error {
	ts := [2]unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
	_, _, errno := unix.Syscall6(
		unix.SYS_UTIMENSAT,
		uintptr(f.fd),
		0,
		uintptr(unsafe.Pointer(&ts[0])),
		0,
		0,
		0,
	)
	if errno != 0 {
		return wrapErr("futimens", f.path, errno)
	}
	return nil
}

// Stat is fstat(2), as an fs.FileInfo whose Sys is a *syscall.Stat_t, as os.Stat's is
// (OSFS.SameFile compares the two).
func (f *osFile) Stat() (fs.FileInfo, error) {
	info := &statInfo{name: filepath.Base(f.path)}
	if err := syscall.Fstat(f.fd, &info.st); err != nil {
		return nil, wrapErr("fstat", f.path, err)
	}
	return info, nil
}

func wrapErr(op, path string, err error) error {
	if err == nil {
		return nil
	}
	return &fs.PathError{Op: op, Path: path, Err: err}
}

// statInfo is an fstat's answer as an fs.FileInfo.
type statInfo struct {
	name string
	st   syscall.Stat_t
}

func (i *statInfo) Name() string       { return i.name }
func (i *statInfo) Size() int64        { return i.st.Size }
func (i *statInfo) ModTime() time.Time { return time.Unix(i.st.Mtim.Unix()) }
func (i *statInfo) IsDir() bool        { return i.Mode().IsDir() }
func (i *statInfo) Sys() any           { return &i.st }
func (i *statInfo) Mode() fs.FileMode {
	m := fs.FileMode(i.st.Mode & 0o777)
	switch i.st.Mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		m |= fs.ModeDir
	case syscall.S_IFIFO:
		m |= fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		m |= fs.ModeSocket
	case syscall.S_IFCHR:
		m |= fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		m |= fs.ModeDevice
	case syscall.S_IFLNK:
		m |= fs.ModeSymlink
	}
	return m
}

// createTemp is os.CreateTemp (a new file, mode 0600, named by pattern with its last "*" replaced
// by a random number, O_EXCL so that two writers never share one) on a raw descriptor.
func createTemp(dir, pattern string) (TempFile, error) {
	prefix, suffix := pattern, ""
	for i := len(pattern) - 1; i >= 0; i-- {
		if pattern[i] == '*' {
			prefix, suffix = pattern[:i], pattern[i+1:]
			break
		}
	}
	for try := 0; ; try++ {
		path := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		fd, err := syscall.Open(
			path,
			syscall.O_RDWR|syscall.O_CREAT|syscall.O_EXCL|syscall.O_CLOEXEC,
			0o600,
		)
		if err == syscall.EEXIST && try < 10000 {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "createtemp", Path: path, Err: err}
		}
		return &osFile{fd: fd, path: path}, nil
	}
}

// sameFile is os.SameFile for any two infos whose Sys is a *syscall.Stat_t (os.Stat's, and
// statInfo's).
func sameFile(a, b fs.FileInfo) bool {
	if a == nil || b == nil {
		return false
	}
	sa, okA := a.Sys().(*syscall.Stat_t)
	sb, okB := b.Sys().(*syscall.Stat_t)
	if !okA || !okB {
		return os.SameFile(a, b)
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// openRegular opens path for reading if it is a regular file (or a symbolic link to one), without
// blocking on whatever else it may be (regular.go says why). The error is fs.ErrNotExist's when
// there is nothing at path, a *notRegularError when there is something else (a socket cannot be
// opened at all, ENXIO: a stat says what it is), or the open's. The file is an osFile, still
// O_NONBLOCK: Linux ignores the flag on a regular file, and a filesystem that honoured it would
// answer a read with EAGAIN, which the osFile meets by clearing the flag.
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
