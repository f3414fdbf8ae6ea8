package bench

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"strings"
	"testing"
)

func smallL3Config(dir string) L3Config {
	return L3Config{Dir: dir, BlockBytes: []int64{4 << 10, 64 << 10}, Blocks: 3, Rounds: 1}
}

// A tiny run gives one sane row per size, validates every byte, and leaves the directory as it
// found it.
func TestRunL3TinyGivesSaneRowsAndLeavesNothingBehind(t *testing.T) {
	dir := t.TempDir()
	rows, err := RunL3(context.Background(), smallL3Config(dir))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].BlockBytes != 4<<10 || rows[1].BlockBytes != 64<<10 {
		t.Fatalf("rows %+v, want one per block size in order", rows)
	}
	sane := func(v float64) bool { return v > 0 && !math.IsInf(v, 0) && !math.IsNaN(v) }
	for _, r := range rows {
		if r.Blocks != 3 || r.Rounds != 1 || r.Wrong != 0 || !sane(r.OursWriteMBps) || !sane(r.RefWriteMBps) ||
			!sane(r.OursReadMBps) || !sane(r.RefReadMBps) || !sane(r.WriteRatio) ||
			!sane(r.ReadRatio) {
			t.Errorf("row %+v: want finite positive rates and ratios and nothing wrong", r)
		}
	}
	assertEmpty(t, dir)
	var b bytes.Buffer
	WriteL3Table(&b, rows)
	if strings.Count(b.String(), "\n") != 2+len(rows)+1 ||
		!strings.Contains(b.String(), "# lowest ours/ref: write ") {
		t.Errorf("table:\n%s", b.String())
	}
}

// cancelAfter is a context whose Err turns to Canceled after n looks: the benchmark stops between
// two blocks.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// Stopped halfway (a signal, or any error), the benchmark still removes every file and directory it
// made.
func TestRunL3RemovesItsFilesWhenStopped(t *testing.T) {
	// The untimed round goes first, ours then the reference, 3 writes then 3 reads each: stop
	// before the first block, among ours' writes, among ours' reads, among the reference's writes
	// and reads.
	for _, n := range []int{0, 2, 5, 8, 10} {
		dir := t.TempDir()
		_, err := RunL3(&cancelAfter{Context: context.Background(), n: n}, smallL3Config(dir))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("stopped after %d blocks: error %v, want context.Canceled", n, err)
		}
		assertEmpty(t, dir)
	}
}

func assertEmpty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("left behind in %s: %s", dir, e.Name())
	}
}

func TestL3ConfigValidate(t *testing.T) {
	good := smallL3Config(t.TempDir())
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(*L3Config){
		"no directory":       func(c *L3Config) { c.Dir = "" },
		"missing directory":  func(c *L3Config) { c.Dir += "/no/such" },
		"no sizes":           func(c *L3Config) { c.BlockBytes = nil },
		"not whole pages":    func(c *L3Config) { c.BlockBytes = []int64{5000} },
		"less than one page": func(c *L3Config) { c.BlockBytes = []int64{0} },
		"no blocks":          func(c *L3Config) { c.Blocks = 0 },
		"no rounds":          func(c *L3Config) { c.Rounds = 0 },
	} {
		c := good
		mutate(&c)
		if c.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestL3RoundBytesRaisesSmallSizesBlocks: a small block size gets the blocks that move
// --round-bytes, a large one keeps --blocks, and the row says how many it timed.
func TestL3RoundBytesRaisesSmallSizesBlocks(t *testing.T) {
	dir := t.TempDir()
	cfg := smallL3Config(dir)
	cfg.RoundBytes = 40 << 10 // ten blocks of 4 KiB; fewer than three of 64 KiB
	rows, err := RunL3(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Blocks != 10 || rows[1].Blocks != 3 ||
		rows[0].Wrong+rows[1].Wrong != 0 {
		t.Errorf("rows %+v: want 10 blocks of 4 KiB and 3 of 64 KiB, nothing wrong", rows)
	}
	assertEmpty(t, dir)
}
