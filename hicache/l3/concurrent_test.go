package l3

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
)

// TestReadersNeverSeeATornBlock: readers racing writers that rewrite one block see a whole version
// (every byte the same version's) or a miss, never a partial or corrupt file. A writer that wrote
// in place would fail this.
func TestReadersNeverSeeATornBlock(t *testing.T) {
	s := openStore(t, t.TempDir(), testNS, 1<<30, nil)
	const tokens = 64 * pageTokens // 4 KiB of payload: large enough to tear
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := s.Write(
					77,
					tokens,
					bytes.Repeat([]byte{byte(w*100 + i%100)}, int(testNS.PayloadBytes(tokens))),
					false,
				); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, testNS.PayloadBytes(tokens))
			for i := 0; i < 400; i++ {
				_, err := s.Read(77, buf)
				if errors.As(err, new(*MissError)) {
					continue
				}
				if err != nil || !bytes.Equal(buf, bytes.Repeat(buf[:1], len(buf))) {
					errs <- fmt.Errorf("read %d: %v (bytes of one version: %v)", i, err, err == nil)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(filesUnder(t, s.dir, ".tmp")); n != 0 {
		t.Errorf("%d temporary files left", n)
	}
}

// TestTwoJobsOnOneDirectory: two Stores on one directory (two jobs) see each other's blocks; a
// block one evicts is the other's miss, never a failure; a block one uses is not the other's to
// evict as least recent.
func TestTwoJobsOnOneDirectory(t *testing.T) {
	dir, clock := t.TempDir(), fakeClock()
	a := openStore(t, dir, testNS, 3*blockFileBytes, clock)
	b := openStore(t, dir, testNS, 3*blockFileBytes, clock)
	buf := make([]byte, 1<<10)
	mustWrite(t, a, 1)
	if !b.Exists(1) {
		t.Fatal("b does not see a's block")
	}
	for _, k := range []uint64{2, 3, 4} { // a evicts 1
		mustWrite(t, a, k)
	}
	if _, err := b.Read(1, buf); !errors.As(err, new(*MissError)) {
		t.Errorf("b's read of a block a evicted: %v, want a miss", err)
	}
	if _, err := b.Read(2, buf); err != nil { // b uses 2: a's oldest by a's own view
		t.Fatal(err)
	}
	mustWrite(t, a, 5)
	if got, want := present(a, 1, 2, 3, 4, 5), []uint64{2, 4, 5}; fmt.Sprint(
		got,
	) != fmt.Sprint(
		want,
	) {
		t.Errorf("after a's next write: %v, want %v (3, not 2, the least recently used)", got, want)
	}
}

// TestTwoJobsHammerOneDirectory: two small-budget Stores write, read and evict the same keys at
// once. Every read is the key's bytes or a miss, and every block left verifies.
func TestTwoJobsHammerOneDirectory(t *testing.T) {
	dir := t.TempDir()
	stores := []*Store{
		openStore(t, dir, testNS, 8*blockFileBytes, nil),
		openStore(t, dir, testNS, 8*blockFileBytes, nil),
	}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for j, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, testNS.PayloadBytes(pageTokens))
			for i := 0; i < 400; i++ {
				key := uint64((i*7 + j*3) % 20)
				if i%3 == 0 {
					if err := s.Write(key, pageTokens, content(key, 0, pageTokens), false); err != nil {
						errs <- err
						return
					}
					continue
				}
				if _, err := s.Read(key, buf); err != nil && !errors.As(err, new(*MissError)) ||
					err == nil && !bytes.Equal(buf, content(key, 0, pageTokens)) {
					errs <- fmt.Errorf("job %d read %d: %v", j, key, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	check := openStore(t, dir, testNS, 1<<20, nil)
	for _, k := range check.lru.keys() {
		if _, err := check.Read(k, make([]byte, 1<<10)); err != nil {
			t.Errorf("block %d left behind: %v", k, err)
		}
	}
	if check.Counters().Corrupt != 0 || len(filesUnder(t, dir, ".tmp")) != 0 {
		t.Errorf("corrupt blocks or temporary files left: %+v", check.Counters())
	}
}
