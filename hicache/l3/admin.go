package l3

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// NamespaceUsage is one namespace directory's contents, for `cphicache l3 stat`.
type NamespaceUsage struct {
	Fingerprint uint64
	Description string // the namespace's printable form, or "" when its file is missing
	// blocks, each whole or split in part-files (a CP group over nodes: one part a node)
	Blocks         int
	PartFiles      int // the part-files among the block files; 0 when every block is whole
	Incomplete     int // split blocks with a part-file missing: no node's reader finds the block
	Bytes          int64
	Oldest, Newest time.Time // the blocks' last use (mtime); zero without blocks
	// writes in flight, or a dead writer's left-overs that the next Open removes
	TemporaryFiles int
}

// Usage lists every namespace under an L3 directory, by fingerprint. It opens no Store and changes
// nothing.
func Usage(dir string) ([]NamespaceUsage, error) {
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	fps, err := namespaceDirs(dir)
	if err != nil {
		return nil, err
	}
	var out []NamespaceUsage
	for _, fp := range fps {
		nsDir := filepath.Join(dir, fmt.Sprintf("%016x", fp))
		blocks, temps, err := scanNamespace(OSFS{}, nsDir)
		if errors.Is(err, fs.ErrNotExist) {
			continue // cleared meanwhile
		}
		if err != nil {
			return nil, err
		}
		u := NamespaceUsage{Fingerprint: fp, TemporaryFiles: len(temps)}
		u.Blocks, u.PartFiles, u.Incomplete = countBlocks(blocks)
		if b, err := readSmallRegular(OSFS{}, filepath.Join(nsDir, namespaceFile), namespaceFileMaxBytes); err == nil {
			u.Description = string(b[:len(b)-min(len(b), 1)])
		}
		for _, b := range blocks {
			u.Bytes += b.bytes
			if u.Oldest.IsZero() || b.modTime.Before(u.Oldest) {
				u.Oldest = b.modTime
			}
			if b.modTime.After(u.Newest) {
				u.Newest = b.modTime
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// countBlocks counts a namespace's block files as blocks: a whole block is one file, a split one k
// part-files (".p<i>of<k>"), of which some may be missing (a node that never wrote its part, or
// evicted it).
func countBlocks(files []fileInfo) (blocks, partFiles, incomplete int) {
	parts := map[uint64]int{}  // part-files found, by the key of a split block
	wanted := map[uint64]int{} // k, by the key of a split block
	for _, f := range files {
		if f.part == "" {
			blocks++
			continue
		}
		var i, k int
		fmt.Sscanf(f.part, ".p%dof%d", &i, &k) // well formed: scanNamespace kept only such names
		parts[f.key]++
		wanted[f.key] = k
		partFiles++
	}
	for key, n := range parts {
		blocks++
		if n < wanted[key] {
			incomplete++
		}
	}
	return blocks, partFiles, incomplete
}

// Clear removes one namespace's directory (fingerprint non-nil) or every namespace's, and returns
// the fingerprints it removed. Only directories named as a fingerprint are touched: whatever else
// lives in the directory is not the L3's. A job running beside it keeps writing blocks: each
// namespace's directory is first renamed aside (a writer then recreates its own, and its writes in
// flight in the old one fail and are dropped), so that the removal does not race the writes; it is
// tried again, up to clearTries times, and a namespace that still resists does not stop the others:
// the error names each namespace left.
func Clear(dir string, fingerprint *uint64) ([]uint64, error) {
	if err := CheckDir(dir); err != nil {
		return nil, err
	}
	fps, err := namespaceDirs(dir)
	if err != nil {
		return nil, err
	}
	var removed []uint64
	var left []error
	// what an earlier clear left aside (it ended, or a namespace resisted it)
	if fingerprint == nil {
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), clearingPrefix) && e.IsDir() {
				left = append(left, removeAll(filepath.Join(dir, e.Name())))
			}
		}
	}
	for _, fp := range fps {
		if fingerprint != nil && *fingerprint != fp {
			continue
		}
		if err := removeNamespace(dir, fmt.Sprintf("%016x", fp)); err != nil {
			left = append(left, fmt.Errorf("namespace %016x is not removed: %w", fp, err))
			continue
		}
		removed = append(removed, fp)
	}
	return removed, errors.Join(left...)
}

// clearTries bounds Clear's attempts at one namespace, clearRetryPause (growing by itself each
// time) apart: about half a second in all, against a job that writes a block every few
// milliseconds.
const (
	clearTries      = 10
	clearRetryPause = 10 * time.Millisecond
)

// clearingPrefix names a namespace's directory that Clear renamed aside to remove it.
const clearingPrefix = ".cphicache-clearing-"

// removeAll is os.RemoveAll; the tests make it fail.
var removeAll = os.RemoveAll

func removeNamespace(dir, name string) (err error) {
	path := filepath.Join(dir, name)
	aside := filepath.Join(
		dir,
		fmt.Sprintf("%s%s-%d", clearingPrefix, name, os.Getpid()),
	) // not a namespace's name
	if os.Rename(path, aside) == nil {
		path = aside
	}
	for try := range clearTries {
		if err = removeAll(path); err == nil {
			return nil
		}
		if errors.Is(err, syscall.EROFS) || errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf(
				"%w (the directory is read-only, or not this user's to write: no retry would remove it)",
				err,
			)
		}
		time.Sleep(time.Duration(try+1) * clearRetryPause)
	}
	return fmt.Errorf(
		"%d tries, the last: %w (a job running beside writes into it: run clear again once it ends)",
		clearTries,
		err,
	)
}

// namespaceDirs lists the fingerprints that have a directory under dir, in order.
func namespaceDirs(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var fps []uint64
	for _, e := range entries {
		if fp, err := strconv.ParseUint(e.Name(), 16, 64); e.IsDir() && len(e.Name()) == 16 &&
			err == nil {
			fps = append(fps, fp)
		}
	}
	sort.Slice(fps, func(i, j int) bool { return fps[i] < fps[j] })
	return fps, nil
}
