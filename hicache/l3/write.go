package l3

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"
)

// Write stores key's block of tokenCount tokens (whole pages) and payload (every rank's, layer's
// and payload's part, in PartOffset's order). It writes a temporary file with a unique name beside
// the block, fsyncs it and the directory when fsync is set, and renames it into place, so a reader
// sees the whole block or none. A failure is a *WriteError and leaves no temporary file. Blocks
// beyond the budget are then evicted, oldest first. A read-only Store (ReadOnly) writes nothing:
// ErrReadOnly.
func (s *Store) Write(key uint64, tokenCount int, payload []byte, fsync bool) error {
	if tokenCount < 1 || tokenCount%s.ns.PageTokens != 0 {
		return fmt.Errorf(
			"l3: write %016x: %d tokens is not whole pages of %d",
			key,
			tokenCount,
			s.ns.PageTokens,
		)
	}
	if want := s.ns.PayloadBytes(tokenCount); int64(len(payload)) != want {
		return fmt.Errorf(
			"l3: write %016x: payload of %d bytes, want %d for %d tokens",
			key,
			len(payload),
			want,
			tokenCount,
		)
	}
	if s.readOnly {
		return ErrReadOnly
	}
	path := s.blockPath(key)
	h := header{
		fingerprint:  s.fingerprint,
		key:          key,
		tokenCount:   uint64(tokenCount),
		payloadBytes: uint64(len(payload)),
	}
	if reason := checkHeader(h, s.ns, s.fingerprint, key); reason != "" {
		panic(
			brokenBlock(
				h,
				s.ns,
				"a block this store writes would not pass its own read: %s",
				reason,
			),
		)
	}
	now := s.now()
	if err := s.publish(path, func(f TempFile) error { return writeBlock(f, h, payload) }, fsync, now); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Writes++
	s.lru.use(key, headerBytes+int64(len(payload)), now)
	s.evictOverBudget()
	if !s.readOnly && s.lru.totalBytes < 0 {
		panic(brokenBlock(h, s.ns, "the budget counts %d bytes after the write", s.lru.totalBytes))
	}
	return nil
}

// publish writes a file (fill writes its bytes) to a temporary file in path's directory and renames
// it to path. Its mtime is set to now before the rename, so the LRU time this process records is
// the one the file shows other jobs: through the descriptor, before the close, when the file offers
// it (an osFile), else by path after the close.
func (s *Store) publish(path string, fill func(TempFile) error, fsync bool, now time.Time) error {
	dir := filepath.Dir(path)
	pattern := "." + filepath.Base(path) + ".*.tmp"
	f, err := s.createTemp(dir, pattern)
	if errors.Is(err, fs.ErrNotExist) {
		// The first write into a fan-out directory makes it (and the namespace's, after an `l3
		// clear`). Looking for it before every write cost a path walk each (one stat, about 2 us on
		// ext4 here) for a directory that is nearly always there.
		_, statErr := s.fs.Stat(s.dir)
		if err := s.fs.MkdirAll(dir, 0o755); err != nil {
			return &WriteError{Path: path, Op: "mkdir", Err: err}
		}
		if errors.Is(statErr, fs.ErrNotExist) && dir != s.dir {
			// An `l3 clear` took the namespace's directory with its namespace.txt: write it again,
			// so that `l3 stat` names the blocks this job goes on writing. Best effort: a block is
			// no less whole without it.
			s.writeNamespaceFile()
		}
		f, err = s.createTemp(dir, pattern)
	}
	if err != nil {
		return &WriteError{Path: path, Op: "create", Err: err}
	}
	tmp := f.Name()
	fail := func(op string, err error) error {
		f.Close()
		s.fs.Remove(tmp)
		return &WriteError{Path: path, Op: op, Err: err}
	}
	if err := fill(f); err != nil {
		return fail("write", err)
	}
	v, touched := f.(vectorWriter)
	if touched {
		if err := v.touch(now); err != nil {
			return fail("chtimes", err)
		}
	}
	if fsync {
		if err := f.Sync(); err != nil {
			return fail("fsync", err)
		}
	}
	if err := f.Close(); err != nil { // NFS reports a failed write back at close
		s.fs.Remove(tmp)
		return &WriteError{Path: path, Op: "close", Err: err}
	}
	steps := []struct {
		op string
		do func() error
	}{{"chtimes", func() error { return s.fs.Chtimes(tmp, now, now) }}, {"rename", func() error { return s.fs.Rename(tmp, path) }}}
	if touched {
		steps = steps[1:]
	}
	for _, step := range steps {
		if err := step.do(); err != nil {
			s.fs.Remove(tmp)
			return &WriteError{Path: path, Op: step.op, Err: err}
		}
	}
	if fsync {
		// the block is published, but a crash could still lose the rename
		if err := s.fs.SyncDir(dir); err != nil {
			return &WriteError{Path: path, Op: "fsync directory", Err: err}
		}
	}
	return nil
}

// writeBlock writes a block file: h, with the payload's sum filled in, then payload. To a file that
// offers pwritev (an osFile), it takes as few system calls as the size allows, each byte of the
// payload hashed while it is in the CPU's cache: a payload of one read chunk or less is hashed,
// then written with its header in one pwritev; a larger one is written a chunk at a time after the
// header's place, each chunk hashed just before its write (which then copies it from the cache),
// and the header last, at offset 0, once the sum is known. Before the last write the file has a
// hole where the header goes; it is not published until renamed.
func writeBlock(f TempFile, h header, payload []byte) error {
	v, ok := f.(vectorWriter)
	if !ok {
		h.payloadSum = payloadSum(payload)
		if _, err := f.Write(h.encode()); err != nil {
			return err
		}
		_, err := f.Write(payload)
		return err
	}
	if len(payload) <= readChunkBytes {
		h.payloadSum = payloadSum(payload)
		return v.pwritev([][]byte{h.encode(), payload}, 0)
	}
	var sums chunkSums
	for off := 0; off < len(payload); off += readChunkBytes {
		chunk := payload[off:min(off+readChunkBytes, len(payload))]
		sums.add(chunk)
		if err := v.pwritev([][]byte{chunk}, headerBytes+int64(off)); err != nil {
			return err
		}
	}
	h.payloadSum = sums.sum()
	return v.pwritev([][]byte{h.encode()}, 0)
}

func (s *Store) miss(key uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Misses++
	s.lru.remove(key)
}

// refresh marks a hit: the file's mtime (what the next job's Open and other jobs' evictions read)
// and the LRU. The open file f is touched through its descriptor when it offers that (an osFile:
// futimens, about half the cost of a touch by path here), else by path. A block evicted by another
// job since it was read needs no refresh: by path, the touch finds nothing and the block is
// forgotten; by descriptor, it touches the removed file, and the block is forgotten when an
// eviction or Exists next looks at its path. A refresh the filesystem refuses (a read-only mount)
// leaves the order to this process alone: the hit was still a hit.
func (s *Store) refresh(key uint64, path string, f ReadFile, fileBytes int64) {
	now := s.now()
	var err error
	if v, ok := f.(vectorReader); ok {
		err = v.touch(now)
	} else {
		err = s.fs.Chtimes(path, now, now)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Hits++
	if errors.Is(err, fs.ErrNotExist) {
		s.lru.remove(key)
		return
	}
	s.lru.use(key, fileBytes, now)
}

// removeCorrupt removes a corrupt block, unless another writer has replaced the file since it was
// opened (opened is what it was then): that one is a new, whole block.
func (s *Store) removeCorrupt(opened fs.FileInfo, path string, key uint64) {
	now, errNow := s.fs.Stat(path)
	if errNow == nil && s.fs.SameFile(opened, now) && !s.readOnly {
		s.fs.Remove(path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Corrupt++
	s.lru.remove(key)
}

// evictOverBudget removes least recently used blocks until the known bytes fit the budget. The LRU
// is this process's view, so each candidate's file is looked at first: one another job removed is
// only forgotten, one another job used since (a newer mtime) moves to its place. Called with s.mu
// held.
func (s *Store) evictOverBudget() {
	if s.readOnly {
		return // nothing can be removed; the budget is the directory's writers'
	}
	for looks := 2 * len(s.lru.byKey); s.lru.totalBytes > s.capacityBytes && looks >= 0; looks-- {
		e := s.lru.oldest()
		path := s.blockPath(e.key)
		info, err := s.fs.Stat(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			s.lru.remove(e.key)
		case err == nil && info.ModTime().After(e.lastUse):
			s.lru.place(e.key, info.Size(), info.ModTime())
		default:
			if err := s.fs.Remove(path); err == nil || errors.Is(err, fs.ErrNotExist) {
				s.counters.Evictions++
			}
			s.lru.remove(e.key)
		}
	}
}

// FailWritesForTest makes every later Write fail at its first step with err, as a full filesystem
// would, for the tests of the callers' error paths. Call it before the Store is shared.
func (s *Store) FailWritesForTest(err error) {
	s.createTemp = func(string, string) (TempFile, error) { return nil, err }
}
