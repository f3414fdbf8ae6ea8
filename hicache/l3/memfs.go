package l3

import (
	"bytes"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// MemFS is a filesystem in memory, for the simulator and the tests: files and directories by path,
// each file with its bytes, mode and modification time, and a hook that may fail any operation
// (Inject). It is not safe for concurrent use: the simulator runs in one thread of control. Files
// are replaced whole (a rename), as the Store's writes do, so a reader never sees a torn file;
// faults corrupt a file on purpose (Corrupt, Truncate, MakeNonRegular).
type MemFS struct {
	nodes  map[string]*memNode
	nextID uint64
	clock  time.Time // each mutation's modification time: a logical clock, one nanosecond a change
	// Inject, when set, is asked before every operation (its name, and the path) and fails it with
	// what it returns.
	Inject func(op, path string) error
}

type memNode struct {
	id  uint64
	dir bool
	// type bits of a non-regular file (fs.ModeNamedPipe, say); 0 for a regular file
	mode  fs.FileMode
	data  []byte
	mtime time.Time
}

// NewMemFS makes an empty filesystem with a root directory.
func NewMemFS() *MemFS {
	m := &MemFS{nodes: map[string]*memNode{}, clock: time.Unix(1_700_000_000, 0)}
	m.nodes["/"] = &memNode{dir: true}
	return m
}

func clean(p string) string { return path.Clean("/" + p) }

// Now is the filesystem's logical clock, which a Store on it uses for the times it sets.
func (m *MemFS) Now() time.Time { return m.tick() }

func (m *MemFS) tick() time.Time {
	m.clock = m.clock.Add(time.Nanosecond)
	return m.clock
}

func (m *MemFS) inject(op, p string) error {
	if m.Inject == nil {
		return nil
	}
	return m.Inject(op, p)
}

func notExist(op, p string) error { return &fs.PathError{Op: op, Path: p, Err: fs.ErrNotExist} }

// memInfo is a node as fs.FileInfo.
type memInfo struct {
	name string
	n    *memNode
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return int64(len(i.n.data)) }
func (i memInfo) ModTime() time.Time { return i.n.mtime }
func (i memInfo) IsDir() bool        { return i.n.dir }
func (i memInfo) Sys() any           { return i.n.id }
func (i memInfo) Type() fs.FileMode  { return i.Mode().Type() }
func (i memInfo) Info() (fs.FileInfo, error) {
	return i, nil
}
func (i memInfo) Mode() fs.FileMode {
	if i.n.dir {
		return fs.ModeDir | 0o755
	}
	return i.n.mode | 0o644
}

func (m *MemFS) Stat(p string) (fs.FileInfo, error) {
	p = clean(p)
	if err := m.inject("stat", p); err != nil {
		return nil, err
	}
	n := m.nodes[p]
	if n == nil {
		return nil, notExist("stat", p)
	}
	return memInfo{path.Base(p), n}, nil
}

func (m *MemFS) OpenRegular(p string) (ReadFile, fs.FileInfo, error) {
	p = clean(p)
	if err := m.inject("open", p); err != nil {
		return nil, nil, err
	}
	n := m.nodes[p]
	if n == nil {
		return nil, nil, notExist("open", p)
	}
	info := memInfo{path.Base(p), n}
	if n.dir || n.mode != 0 {
		return nil, nil, &notRegularError{path: p, info: info}
	}
	return &memReader{m: m, path: p, info: info, r: bytes.NewReader(n.data)}, info, nil
}

// memReader reads a file as it was when opened (a rename replaces the node, not its bytes).
type memReader struct {
	m    *MemFS
	path string
	info memInfo
	r    *bytes.Reader
}

func (f *memReader) Read(b []byte) (int, error) {
	if err := f.m.inject("read", f.path); err != nil {
		return 0, err
	}
	return f.r.Read(b)
}
func (f *memReader) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memReader) Close() error               { return nil }

func (m *MemFS) CreateTemp(dir, pattern string) (TempFile, error) {
	dir = clean(dir)
	if err := m.inject("create", dir); err != nil {
		return nil, err
	}
	if d := m.nodes[dir]; d == nil || !d.dir {
		return nil, notExist("create", dir)
	}
	m.nextID++
	name := path.Join(dir, strings.Replace(pattern, "*", fmt.Sprintf("%d", m.nextID), 1))
	m.nodes[name] = &memNode{id: m.nextID, mtime: m.tick()}
	return &memWriter{m: m, path: name}, nil
}

// memWriter appends to a file created by CreateTemp.
type memWriter struct {
	m    *MemFS
	path string
}

func (f *memWriter) Write(b []byte) (int, error) {
	if err := f.m.inject("write", f.path); err != nil {
		return 0, err
	}
	n := f.m.nodes[f.path]
	if n == nil {
		return 0, notExist("write", f.path)
	}
	n.data = append(n.data, b...)
	return len(b), nil
}
func (f *memWriter) Sync() error  { return f.m.inject("fsync", f.path) }
func (f *memWriter) Close() error { return f.m.inject("close", f.path) }
func (f *memWriter) Name() string { return f.path }

func (m *MemFS) Rename(oldPath, newPath string) error {
	oldPath, newPath = clean(oldPath), clean(newPath)
	if err := m.inject("rename", newPath); err != nil {
		return err
	}
	n := m.nodes[oldPath]
	if n == nil {
		return notExist("rename", oldPath)
	}
	delete(m.nodes, oldPath)
	m.nodes[newPath] = n
	return nil
}

func (m *MemFS) Chtimes(p string, _, mtime time.Time) error {
	p = clean(p)
	if err := m.inject("chtimes", p); err != nil {
		return err
	}
	n := m.nodes[p]
	if n == nil {
		return notExist("chtimes", p)
	}
	n.mtime = mtime
	return nil
}

func (m *MemFS) Remove(p string) error {
	p = clean(p)
	if err := m.inject("remove", p); err != nil {
		return err
	}
	n := m.nodes[p]
	if n == nil {
		return notExist("remove", p)
	}
	if n.dir && len(m.children(p)) > 0 {
		return &fs.PathError{Op: "remove", Path: p, Err: fmt.Errorf("directory not empty")}
	}
	delete(m.nodes, p)
	return nil
}

func (m *MemFS) MkdirAll(p string, _ fs.FileMode) error {
	p = clean(p)
	if err := m.inject("mkdir", p); err != nil {
		return err
	}
	for d := p; ; d = path.Dir(d) {
		if n := m.nodes[d]; n == nil {
			m.nodes[d] = &memNode{dir: true, mtime: m.tick()}
		} else if !n.dir {
			return &fs.PathError{Op: "mkdir", Path: d, Err: fmt.Errorf("not a directory")}
		}
		if d == "/" {
			return nil
		}
	}
}

// children lists the names directly under directory p, sorted.
func (m *MemFS) children(p string) []string {
	prefix := strings.TrimSuffix(p, "/") + "/"
	var out []string
	for q := range m.nodes {
		if rest, ok := strings.CutPrefix(q, prefix); ok && rest != "" &&
			!strings.Contains(rest, "/") {
			out = append(out, rest)
		}
	}
	slices.Sort(out) // the map gathers; the order comes from here
	return out
}

func (m *MemFS) ReadDir(p string) ([]fs.DirEntry, error) {
	p = clean(p)
	if err := m.inject("readdir", p); err != nil {
		return nil, err
	}
	if n := m.nodes[p]; n == nil || !n.dir {
		return nil, notExist("readdir", p)
	}
	var out []fs.DirEntry
	for _, name := range m.children(p) {
		out = append(out, memInfo{name, m.nodes[path.Join(p, name)]})
	}
	return out, nil
}

func (m *MemFS) SyncDir(p string) error         { return m.inject("fsync", clean(p)) }
func (m *MemFS) SameFile(a, b fs.FileInfo) bool { return a.Sys() != nil && a.Sys() == b.Sys() }

// Corrupt flips a byte of the file at p, past its header when it is long enough; false when there
// is none.
func (m *MemFS) Corrupt(p string) bool {
	n := m.nodes[clean(p)]
	if n == nil || n.dir || len(n.data) == 0 {
		return false
	}
	n.data = slices.Clone(n.data)
	n.data[len(n.data)-1] ^= 0x5a
	return true
}

// Truncate cuts the file at p to half its length.
func (m *MemFS) Truncate(p string) bool {
	n := m.nodes[clean(p)]
	if n == nil || n.dir {
		return false
	}
	n.data = slices.Clone(n.data[:len(n.data)/2])
	return true
}

// MakeNonRegular puts a named pipe at p, as another program might.
func (m *MemFS) MakeNonRegular(p string) {
	p = clean(p)
	m.nextID++
	m.nodes[p] = &memNode{id: m.nextID, mode: fs.ModeNamedPipe, mtime: m.tick()}
}

// Files lists the regular files under directory p, at any depth, sorted.
func (m *MemFS) Files(p string) []string {
	prefix := strings.TrimSuffix(clean(p), "/") + "/"
	var out []string
	for q, n := range m.nodes {
		if strings.HasPrefix(q, prefix) && !n.dir && n.mode == 0 {
			out = append(out, q)
		}
	}
	slices.Sort(out)
	return out
}
