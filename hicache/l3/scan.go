package l3

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// namespaceFile holds a namespace's printable form beside its blocks, for `cphicache l3 stat`; a
// line of about a hundred bytes, so a larger one is not ours.
const namespaceFile, namespaceFileMaxBytes = "namespace.txt", 64 << 10

// writeNamespaceFile creates the namespace's directory and (re)writes its description, atomically.
// It is also Open's proof that the directory is writable.
func (s *Store) writeNamespaceFile() error {
	if err := s.fs.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(s.dir, namespaceFile)
	if b, err := readSmallRegular(s.fs, path, namespaceFileMaxBytes); err == nil &&
		string(b) == s.ns.String()+"\n" {
		return nil
	}
	err := s.publish(path, func(f TempFile) error {
		_, err := f.Write([]byte(s.ns.String() + "\n"))
		return err
	}, false, s.now())
	var we *WriteError
	if errors.As(err, &we) {
		return fmt.Errorf("%s: %w", we.Op, we.Err)
	}
	return err
}

// fileInfo is one block file, or one temporary file, found by a scan.
type fileInfo struct {
	key     uint64
	part    string // "" for a whole block, ".p<i>of<k>" for a part-file
	path    string
	bytes   int64
	modTime time.Time
}

// scanNamespace lists a namespace directory's blocks and temporary files. A file removed while the
// scan runs (another job's eviction or rename) is skipped.
func scanNamespace(fsys FS, dir string) (blocks, temps []fileInfo, err error) {
	fans, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, fan := range fans {
		if !fan.IsDir() || len(fan.Name()) != 2 {
			continue
		}
		entries, err := fsys.ReadDir(filepath.Join(dir, fan.Name()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, nil, err
		}
		for _, e := range entries {
			info, err := e.Info()
			if err != nil || !info.Mode().IsRegular() {
				continue
			}
			fi := fileInfo{
				path:    filepath.Join(dir, fan.Name(), e.Name()),
				bytes:   info.Size(),
				modTime: info.ModTime(),
			}
			if name := e.Name(); isTemp(name) {
				temps = append(temps, fi)
			} else if key, part, ok := parseBlockName(name); ok {
				fi.key, fi.part = key, part
				blocks = append(blocks, fi)
			}
		}
	}
	return blocks, temps, nil
}

func isTemp(
	name string,
) bool {
	return strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".tmp")
}

// parseBlockName reads <key hex>.blk, or a part-file's <key hex>.p<i>of<k>.blk (part is then
// ".p<i>of<k>").
func parseBlockName(name string) (key uint64, part string, ok bool) {
	stem, ok := strings.CutSuffix(name, ".blk")
	if !ok || len(stem) < 16 {
		return 0, "", false
	}
	key, err := strconv.ParseUint(stem[:16], 16, 64)
	part = stem[16:]
	if err != nil || part != "" && !isPartSuffix(part) {
		return 0, "", false
	}
	return key, part, true
}

// isPartSuffix says whether s is ".p<i>of<k>" with i < k, both decimal without leading zeros.
func isPartSuffix(s string) bool {
	var i, k int
	if n, err := fmt.Sscanf(s, ".p%dof%d", &i, &k); err != nil || n != 2 || i < 0 || i >= k {
		return false
	}
	return s == fmt.Sprintf(".p%dof%d", i, k)
}

// seed removes stale temporary files (a writer that died before its rename) and orders the blocks
// by mtime, ties by key, so that this job's LRU continues the last one's.
func (s *Store) seed() error {
	blocks, temps, err := scanNamespace(s.fs, s.dir)
	if err != nil {
		return fmt.Errorf("l3: scan %s: %w", s.dir, err)
	}
	cutoff := s.now().Add(-staleTempAge)
	for _, t := range temps {
		if t.modTime.Before(cutoff) && s.fs.Remove(t.path) == nil {
			s.counters.StaleTempsRemoved++
		}
	}
	sort.Slice(blocks, func(i, j int) bool {
		if !blocks[i].modTime.Equal(blocks[j].modTime) {
			return blocks[i].modTime.Before(blocks[j].modTime)
		}
		return blocks[i].key < blocks[j].key
	})
	for _, b := range blocks {
		if b.part == s.partSuffix { // another node's part-files are its keeper's
			s.lru.use(b.key, b.bytes, b.modTime)
		}
	}
	return nil
}
