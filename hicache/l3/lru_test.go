package l3

import (
	"os"
	"reflect"
	"testing"
	"time"
)

// present lists which of keys have a block file, in order.
func present(s *Store, keys ...uint64) []uint64 {
	var out []uint64
	for _, k := range keys {
		if _, err := os.Stat(s.blockPath(k)); err == nil {
			out = append(out, k)
		}
	}
	return out
}

// TestEvictionByLastUse: over the budget, the least recently used block goes, and a hit counts as a
// use, on disk (the mtime) as in the order.
func TestEvictionByLastUse(t *testing.T) {
	clock := fakeClock()
	s := openStore(t, t.TempDir(), testNS, 3*blockFileBytes, clock)
	for _, k := range []uint64{1, 2, 3} {
		mustWrite(t, s, k)
	}
	if _, err := s.Read(1, make([]byte, 1<<10)); err != nil { // 1 is now the most recent
		t.Fatal(err)
	}
	info, err := os.Stat(s.blockPath(1))
	if err != nil || !info.ModTime().After(mtime(t, s, 3)) {
		t.Errorf("a hit did not refresh the block's mtime: %v", err)
	}
	mustWrite(t, s, 4)
	if got, want := present(s, 1, 2, 3, 4), []uint64{1, 3, 4}; !reflect.DeepEqual(got, want) {
		t.Errorf("after writing 4: blocks %v, want %v (2 the least recently used)", got, want)
	}
	mustWrite(t, s, 5)
	if got, want := present(s, 1, 2, 3, 4, 5), []uint64{1, 4, 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("after writing 5: blocks %v, want %v", got, want)
	}
	if c := s.Counters(); c.Evictions != 2 || s.UsedBytes() != 3*blockFileBytes {
		t.Errorf("%+v, %d bytes used", c, s.UsedBytes())
	}
}

func mtime(t *testing.T, s *Store, key uint64) time.Time {
	t.Helper()
	info, err := os.Stat(s.blockPath(key))
	if err != nil {
		t.Fatal(err)
	}
	return info.ModTime()
}

// TestOpenContinuesTheLastOrder: a new Store (the next job) orders the blocks by their mtimes, so
// its first eviction takes the block the last job used least recently; a smaller budget evicts at
// Open.
func TestOpenContinuesTheLastOrder(t *testing.T) {
	dir, clock := t.TempDir(), fakeClock()
	first := openStore(t, dir, testNS, 10*blockFileBytes, clock)
	for _, k := range []uint64{10, 20, 30, 40} {
		mustWrite(t, first, k)
	}
	for _, k := range []uint64{10, 30} {
		if _, err := first.Read(k, make([]byte, 1<<10)); err != nil {
			t.Fatal(err)
		}
	}
	second := openStore(t, dir, testNS, 4*blockFileBytes, clock)
	if got, want := second.lru.keys(), []uint64{20, 40, 10, 30}; !reflect.DeepEqual(got, want) {
		t.Fatalf("seeded order %v, want %v (least recently used first)", got, want)
	}
	mustWrite(t, second, 50)
	if got, want := present(second, 10, 20, 30, 40, 50), []uint64{10, 30, 40, 50}; !reflect.DeepEqual(
		got,
		want,
	) {
		t.Errorf("after the next job's first write: %v, want %v", got, want)
	}
	third := openStore(t, dir, testNS, 2*blockFileBytes, clock)
	if got, want := present(third, 10, 30, 40, 50), []uint64{30, 50}; !reflect.DeepEqual(
		got,
		want,
	) {
		t.Errorf("Open with a budget of 2 blocks kept %v, want %v", got, want)
	}
}

// TestOpenRemovesStaleTemporaryFiles: a writer that died before its rename leaves a temporary file;
// Open removes it once it is older than staleTempAge, and leaves a fresh one (a write in flight in
// another job).
func TestOpenRemovesStaleTemporaryFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, testNS, 1<<20, nil)
	mustWrite(t, s, 7)
	fan := s.blockPath(7)[:len(s.blockPath(7))-len("0000000000000007.blk")]
	stale, fresh := fan+".0000000000000008.blk.1.tmp", fan+".0000000000000009.blk.2.tmp"
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("half a block"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-staleTempAge - time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	again := openStore(t, dir, testNS, 1<<20, nil)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file is still there: %v", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("a fresh temporary file was removed: %v", err)
	}
	if c := again.Counters(); c.StaleTempsRemoved != 1 || again.UsedBytes() != blockFileBytes {
		t.Errorf("%+v, %d bytes: temporary files must not count as blocks", c, again.UsedBytes())
	}
}
