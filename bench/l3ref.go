package bench

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// The reference side of bench l3: the same blocks written and read as plain files with os calls, no format and no
// check, so that ours reads as a ratio to what the filesystem itself gives.

// runRef is the reference: what os.WriteFile does (create, write, optional fsync, close) for each
// block in one plain directory, then each file read back whole into the same preallocated buffer,
// as os.ReadFile does but without its allocation.
func (c *l3Case) runRef(ctx context.Context, validate bool) (l3Times, error) {
	var t l3Times
	start := time.Now()
	for i, key := range c.keys {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		c.stamp(i)
		if err := writeRefFile(refPath(c.refDir, key), c.payload, c.cfg.Fsync); err != nil {
			return t, err
		}
	}
	t.write = time.Since(start).Seconds()
	if err := c.dropCached(c.refDir); err != nil {
		return t, err
	}
	start = time.Now()
	for i, key := range c.keys {
		if err := ctx.Err(); err != nil {
			return t, err
		}
		if n, err := readRefFile(refPath(c.refDir, key), c.into); err != nil {
			return t, err
		} else if n != len(c.payload) {
			t.wrong++
		} else {
			t.wrong += c.check(validate, i)
		}
	}
	t.read = time.Since(start).Seconds()
	return t, nil
}

// dropCached, with Cold, writes back and drops from the page cache every file under dir (fdatasync,
// then posix_fadvise DONTNEED: only clean pages can be dropped), so that the reads that follow come
// from the device.
func (c *l3Case) dropCached(dir string) error {
	if !c.cfg.Cold {
		return nil
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fd := int(f.Fd())
		if err := unix.Fdatasync(fd); err != nil {
			return fmt.Errorf("%s: fdatasync: %w", path, err)
		}
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			return fmt.Errorf("%s: posix_fadvise: %w", path, err)
		}
		return nil
	})
}

// refPath names the reference's file as the store names a block, so both sides pay for formatting a
// name.
func refPath(
	dir string,
	key uint64,
) string {
	return filepath.Join(dir, fmt.Sprintf("%016x.ref", key))
}

func writeRefFile(path string, b []byte, fsync bool) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if fsync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// readRefFile reads the whole file into into and returns its size; a file larger than into is an
// error.
func readRefFile(path string, into []byte) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if info.Size() > int64(len(into)) {
		return 0, fmt.Errorf("%s: %d bytes, the buffer holds %d", path, info.Size(), len(into))
	}
	return io.ReadFull(f, into[:info.Size()])
}
