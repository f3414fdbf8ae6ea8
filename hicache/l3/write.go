package l3

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"
)

// Write stores key's block of tokenCount tokens (whole pages) and payload (every rank's, layer's and payload's
// part, in PartOffset's order). It writes a temporary file with a unique name beside the block, fsyncs it and
// the directory when fsync is set, and renames it into place, so a reader sees the whole block or none. A
// failure is a *WriteError and leaves no temporary file. Blocks beyond the budget are then evicted, oldest first.
func (s *Store) Write(key uint64, tokenCount int, payload []byte, fsync bool) error {
	if tokenCount < 1 || tokenCount%s.ns.PageTokens != 0 {
		return fmt.Errorf("l3: write %016x: %d tokens is not whole pages of %d", key, tokenCount, s.ns.PageTokens)
	}
	if want := s.ns.PayloadBytes(tokenCount); int64(len(payload)) != want {
		return fmt.Errorf("l3: write %016x: payload of %d bytes, want %d for %d tokens", key, len(payload), want, tokenCount)
	}
	path := s.blockPath(key)
	h := header{fingerprint: s.fingerprint, key: key, tokenCount: uint64(tokenCount),
		payloadBytes: uint64(len(payload)), payloadSum: payloadSum(payload)}
	now := s.now()
	if err := s.publish(path, h.encode(), payload, fsync, now); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Writes++
	s.lru.use(key, headerBytes+int64(len(payload)), now)
	s.evictOverBudget()
	return nil
}

// publish writes head and body to a temporary file in path's directory and renames it to path. Its mtime is
// set to now before the rename, so the LRU time this process records is the one the file shows other jobs.
func (s *Store) publish(path string, head, body []byte, fsync bool, now time.Time) error {
	dir := filepath.Dir(path)
	pattern := "." + filepath.Base(path) + ".*.tmp"
	f, err := s.createTemp(dir, pattern)
	if errors.Is(err, fs.ErrNotExist) {
		// The first write into a fan-out directory makes it (and the namespace's, after an `l3 clear`). Looking
		// for it before every write cost a path walk each (one stat, about 2 us on ext4 here) for a directory that
		// is nearly always there.
		if err := s.fs.MkdirAll(dir, 0o755); err != nil {
			return &WriteError{Path: path, Op: "mkdir", Err: err}
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
	if _, err := f.Write(head); err != nil {
		return fail("write", err)
	}
	if _, err := f.Write(body); err != nil {
		return fail("write", err)
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
	for _, step := range []struct {
		op string
		do func() error
	}{{"chtimes", func() error { return s.fs.Chtimes(tmp, now, now) }}, {"rename", func() error { return s.fs.Rename(tmp, path) }}} {
		if err := step.do(); err != nil {
			s.fs.Remove(tmp)
			return &WriteError{Path: path, Op: step.op, Err: err}
		}
	}
	if fsync {
		if err := s.fs.SyncDir(dir); err != nil { // the block is published, but a crash could still lose the rename
			return &WriteError{Path: path, Op: "fsync directory", Err: err}
		}
	}
	return nil
}

func (s *Store) miss(key uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Misses++
	s.lru.remove(key)
}

// refresh marks a hit: the file's mtime (what the next job's Open and other jobs' evictions read) and the LRU.
// A block evicted by another job since it was read needs no refresh. A refresh the filesystem refuses (a
// read-only mount) leaves the order to this process alone: the hit was still a hit.
func (s *Store) refresh(key uint64, path string, fileBytes int64) {
	now := s.now()
	err := s.fs.Chtimes(path, now, now)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Hits++
	if errors.Is(err, fs.ErrNotExist) {
		s.lru.remove(key)
		return
	}
	s.lru.use(key, fileBytes, now)
}

// removeCorrupt removes a corrupt block, unless another writer has replaced the file since it was opened (opened
// is what it was then): that one is a new, whole block.
func (s *Store) removeCorrupt(opened fs.FileInfo, path string, key uint64) {
	now, errNow := s.fs.Stat(path)
	if errNow == nil && s.fs.SameFile(opened, now) {
		s.fs.Remove(path)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counters.Corrupt++
	s.lru.remove(key)
}

// evictOverBudget removes least recently used blocks until the known bytes fit the budget. The LRU is this
// process's view, so each candidate's file is looked at first: one another job removed is only forgotten, one
// another job used since (a newer mtime) moves to its place. Called with s.mu held.
func (s *Store) evictOverBudget() {
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

// FailWritesForTest makes every later Write fail at its first step with err, as a full filesystem would, for the
// tests of the callers' error paths. Call it before the Store is shared.
func (s *Store) FailWritesForTest(err error) {
	s.createTemp = func(string, string) (TempFile, error) { return nil, err }
}
