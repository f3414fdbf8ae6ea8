// Package outfile owns the files a command writes for its user (the run's --report and
// --metrics-file, sweep's --json and --plot, gen-trace's --output): each is checked before the work
// starts, so that a typo in a directory costs a second and not the run, and each is written whole
// or not at all, so that a full disk never leaves an empty file in place of the previous one.
//
// It imports errscope (for the error that names the flag) and nothing else of cphicache.
package outfile

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cphicache/cphicache/internal/errscope"
)

const accessWrite = 2 // W_OK of access(2)

// Check fails, naming flag, on an output path whose directory is missing, not a directory or not
// writable, or that is a directory itself. An empty path (no output asked for) passes.
func Check(flag, path string) error {
	if path == "" {
		return nil
	}
	t := resolve(path)
	if t.inPlace { // written through itself
		if err := syscall.Access(path, accessWrite); err != nil {
			return &errscope.ConfigError{
				Flag:   flag,
				Reason: fmt.Sprintf("%s is not writable: %v", path, err),
			}
		}
		return nil
	}
	shown := path
	if t.path != path {
		shown = fmt.Sprintf("%s (a link to %s)", path, t.path)
	}
	dir := filepath.Dir(t.path)
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return &errscope.ConfigError{
			Flag:   flag,
			Reason: fmt.Sprintf("%s: the directory %s does not exist", shown, dir),
		}
	}
	if err := syscall.Access(dir, accessWrite); err != nil {
		return &errscope.ConfigError{
			Flag:   flag,
			Reason: fmt.Sprintf("%s: the directory %s is not writable: %v", shown, dir, err),
		}
	}
	if fi, err := os.Stat(t.path); err == nil && fi.IsDir() {
		return &errscope.ConfigError{Flag: flag, Reason: fmt.Sprintf("%s is a directory", shown)}
	}
	return nil
}

// Write writes data to path through a temporary file in path's directory, renamed over path once it
// is whole and synced: a reader sees the previous file or the new one, never a part. On an error
// the temporary file is removed and path is untouched; the error names flag.
func Write(flag, path string, data []byte) error {
	return WriteFrom(flag, path, func(w io.Writer) error {
		_, err := io.Copy(w, bytes.NewReader(data))
		return err
	})
}

// WriteFrom is Write of what write produces.
func WriteFrom(flag, path string, write func(io.Writer) error) error {
	if err := writeAtomic(path, write); err != nil {
		return fmt.Errorf("--%s %s: %w", flag, path, err)
	}
	return nil
}

func writeAtomic(path string, write func(io.Writer) error) (err error) {
	t := resolve(path)
	if t.inPlace {
		return writeInPlace(path, write)
	}
	path = t.path
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	// CreateTemp makes the file 0600; the output is the user's to share like any file they create.
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// maxLinks bounds resolve's walk, as the kernel's 40 (ELOOP) bounds a path's.
const maxLinks = 40

// target is where a command's output path is written and removed.
type target struct {
	path string
	// inPlace: a stream (a device, a FIFO, a socket) or a descriptor's path (/dev/stdout,
	// /dev/fd/N, /proc/...): written through the path as given, appended to, never renamed over or
	// removed. /dev/stdout of a shell's `> out.log` names out.log itself: followed, it was removed
	// and replaced by the job's file.
	inPlace bool
}

// resolve follows path's last component through symbolic links to the file they name, which need
// not exist yet (a link to this run's file, made before the run), so that a user's link stays a
// link: a temporary file renamed over the link itself would turn it into a copy and leave the file
// it names with the previous result. A relative link is read against its directory's real path, as
// the kernel reads it (a textual ".." after a linked directory names another file). A path that is
// no link is its own target.
func resolve(path string) target {
	if isStream(path) {
		return target{path: path, inPlace: true}
	}
	p := path
	for i := 0; i < maxLinks; i++ {
		if isDescriptorPath(p) {
			return target{path: path, inPlace: true}
		}
		to, err := os.Readlink(p)
		if err != nil {
			return target{path: p}
		}
		if !filepath.IsAbs(to) {
			dir := filepath.Dir(p)
			if real, err := filepath.EvalSymlinks(dir); err == nil {
				dir = real
			}
			to = filepath.Join(dir, to)
		}
		p = to
	}
	return target{path: p}
}

// isDescriptorPath says whether p names a process's open descriptor (/proc/self/fd/1, /dev/fd/3),
// whose file the process shares with its launcher and must write through, not replace.
func isDescriptorPath(p string) bool {
	return strings.HasPrefix(p, "/proc/") || strings.HasPrefix(p, "/dev/fd/")
}

// isStream says whether path exists and is neither a regular file nor a directory (a device, a
// FIFO, a socket): such a path is written through itself, never replaced.
func isStream(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && !fi.Mode().IsRegular()
}

// Remove removes the file at path, as a job's clean-up does (a periodic metrics file at a signal),
// but never a path that is not a regular file: written in place, /dev/null stays /dev/null, and
// removed it would be gone for every later job on the node (as root). A link's file is removed and
// the link, the user's, is kept. A path already gone is no error.
func Remove(path string) error {
	t := resolve(path)
	if t.inPlace {
		return nil
	}
	path = t.path
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	return os.Remove(path)
}

// writeInPlace writes to a path that is not a regular file (/dev/null, /dev/stdout, a FIFO) through
// the path itself: a temporary file renamed over it would replace the device with a file (as root:
// every later writer to /dev/null then filled a file), and "whole or not at all" means nothing for
// a stream.
func writeInPlace(path string, write func(io.Writer) error) error {
	// O_APPEND: /dev/stdout redirected to a file opens that file anew, at offset 0, and would write
	// over what the process printed before.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// File is a command's file: the flag that names it and its path ("" when not given).
type File struct{ Flag, Path string }

// CheckDistinct refuses, naming the output's flag, an output that is the same file as another
// output or as an input: written, it would replace the input (a --report over the --trace it
// replays) or the other output's result. Paths are compared as the files they name: links followed,
// and an existing file also by its device and inode (a hard link). Streams (/dev/null for two
// outputs) and paths not given pass.
func CheckDistinct(outputs, inputs []File) error {
	for i, out := range outputs {
		if out.Path == "" || resolve(out.Path).inPlace {
			continue
		}
		for j, other := range append(append([]File{}, outputs[:i]...), inputs...) {
			if other.Path == "" || other.Path == "-" || !sameFile(out.Path, other.Path) {
				continue
			}
			why := "each would replace the other's result"
			if j >= i {
				why = "writing it would destroy that input"
			}
			return &errscope.ConfigError{
				Flag: out.Flag,
				Reason: fmt.Sprintf(
					"%s is the same file as --%s %s: %s",
					out.Path,
					other.Flag,
					other.Path,
					why,
				),
			}
		}
	}
	return nil
}

// sameFile says whether a and b name one file: the same absolute path once links are followed, or,
// when both exist, the same device and inode.
func sameFile(a, b string) bool {
	a, b = resolve(a).path, resolve(b).path
	if absA, errA := filepath.Abs(a); errA == nil {
		if absB, errB := filepath.Abs(b); errB == nil && absA == absB {
			return true
		}
	}
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(fa, fb)
}
