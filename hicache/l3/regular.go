package l3

import (
	"fmt"
	"io"
	"io/fs"
)

// A block's path, or namespace.txt, can be something other than a regular file: another program's
// FIFO, a directory, a socket, a device, or a symbolic link to one. Opening a FIFO for reading
// blocks until a writer opens it, which no timeout of ours can interrupt (the goroutine is inside
// open(2)); reading a device may never end. So such a path is opened with O_NONBLOCK (a FIFO's open
// then returns at once) and looked at through the open descriptor (fstat, so it is the file that
// would be read, not one a rename put there since) before a byte is read.

// notRegularError says that a path is there but is not a regular file; info is what it is.
type notRegularError struct {
	path string
	info fs.FileInfo
}

func (e *notRegularError) Error() string { return e.path + " " + e.reason() }
func (e *notRegularError) reason() string {
	return fmt.Sprintf("is %s, not a regular file", fileKind(e.info.Mode()))
}

// fileKind names a mode's type for a person.
func fileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe (FIFO)"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a block device"
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	}
	return "an irregular file (" + m.Type().String() + ")"
}

// readSmallRegular reads a small file (namespace.txt) whole, as os.ReadFile would, but refuses one
// that is not a regular file instead of blocking on it, and one over maxBytes.
func readSmallRegular(fsys FS, path string, maxBytes int64) ([]byte, error) {
	f, info, err := fsys.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info.Size() > maxBytes {
		return nil, fmt.Errorf(
			"%s: %d bytes, more than the %d it may hold",
			path,
			info.Size(),
			maxBytes,
		)
	}
	return io.ReadAll(io.LimitReader(f, maxBytes))
}
