package l3

import (
	"fmt"
	"io/fs"
	"os"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// TestUsageAndClear: Usage counts each namespace's blocks and bytes and names it; Clear removes one
// namespace or all, and nothing else in the directory.
func TestUsageAndClear(t *testing.T) {
	dir, clock := t.TempDir(), fakeClock()
	other := testNS
	other.Name = "another model"
	a, b := openStore(t, dir, testNS, 1<<20, clock), openStore(t, dir, other, 1<<20, clock)
	for _, k := range []uint64{1, 2, 3} {
		mustWrite(t, a, k)
	}
	mustWrite(t, b, 1)
	u, err := Usage(dir)
	if err != nil || len(u) != 2 {
		t.Fatalf("Usage: %+v, %v", u, err)
	}
	byFP := map[uint64]NamespaceUsage{u[0].Fingerprint: u[0], u[1].Fingerprint: u[1]}
	ua, ub := byFP[a.Fingerprint()], byFP[b.Fingerprint()]
	if ua.Blocks != 3 || ua.Bytes != 3*blockFileBytes || ua.Description != testNS.String() ||
		!ua.Oldest.Before(ua.Newest) {
		t.Errorf("namespace a: %+v", ua)
	}
	if ub.Blocks != 1 || ub.Description != other.String() || !ub.Oldest.Equal(ub.Newest) {
		t.Errorf("namespace b: %+v", ub)
	}
	fp := a.Fingerprint()
	if removed, err := Clear(dir, &fp); err != nil || !reflect.DeepEqual(removed, []uint64{fp}) ||
		a.Exists(1) ||
		!b.Exists(1) {
		t.Errorf("Clear one: %x, %v", removed, err)
	}
	if removed, err := Clear(dir, nil); err != nil || len(removed) != 1 || b.Exists(1) {
		t.Errorf("Clear all: %x, %v", removed, err)
	}
	if u, err := Usage(dir); err != nil || len(u) != 0 {
		t.Errorf("Usage after Clear: %+v, %v", u, err)
	}
	mustWrite(t, a, 4) // a Store outlives a Clear: its directory comes back, named again
	if !a.Exists(4) {
		t.Error("a write after Clear is lost")
	}
	if u, err := Usage(dir); err != nil || len(u) != 1 || u[0].Description != testNS.String() {
		t.Errorf(
			"Usage after a write that followed Clear: %+v, %v; want the namespace named again",
			u,
			err,
		)
	}
}

// TestClearRetriesAndFinishesWhatItCan: a namespace a running job writes into resists a removal now
// and then (ENOTEMPTY: a block arrived between its files' removal and its own); Clear tries it
// again, and one that resists every try does not stop the others: the error names it, and the
// tries.
func TestClearRetriesAndFinishesWhatItCan(t *testing.T) {
	dir := t.TempDir()
	other := testNS
	other.Name = "another model"
	a, b := openStore(t, dir, testNS, 1<<20, nil), openStore(t, dir, other, 1<<20, nil)
	mustWrite(t, a, 1)
	mustWrite(t, b, 1)
	resisting := fmt.Sprintf("%016x", a.Fingerprint())
	fails := 3 // a's namespace fails three times, then gives way
	removeAll = func(path string) error {
		if strings.Contains(path, resisting) && fails > 0 {
			fails--
			return &fs.PathError{Op: "unlinkat", Path: path, Err: syscall.ENOTEMPTY}
		}
		return os.RemoveAll(path)
	}
	defer func() { removeAll = os.RemoveAll }()
	if removed, err := Clear(dir, nil); err != nil || len(removed) != 2 || a.Exists(1) ||
		b.Exists(1) {
		t.Errorf(
			"a namespace that resists three times: removed %x, %v; want both removed",
			removed,
			err,
		)
	}
	mustWrite(t, a, 2)
	mustWrite(t, b, 2)
	fails = clearTries
	removed, err := Clear(dir, nil)
	if want := fmt.Sprintf("namespace %016x is not removed: %d tries", a.Fingerprint(), clearTries); err == nil ||
		!strings.Contains(err.Error(), want) ||
		!reflect.DeepEqual(removed, []uint64{b.Fingerprint()}) ||
		b.Exists(2) ||
		a.Exists(2) {
		t.Errorf(
			"a namespace that resists every try: removed %x, %v; want the other removed and %q",
			removed,
			err,
			want,
		)
	}
	if removed, err := Clear(dir, nil); err != nil || len(removed) != 0 {
		t.Errorf(
			"the next clear: removed %x, %v; want what the last left aside removed",
			removed,
			err,
		)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Errorf("left in the directory: %v, %v", entries, err)
	}
	// Read-only storage resists every try alike: one try, and a reason that does not blame a
	// running job.
	mustWrite(t, a, 3)
	tries := 0
	removeAll = func(path string) error {
		tries++
		return &fs.PathError{Op: "unlinkat", Path: path, Err: syscall.EROFS}
	}
	if _, err := Clear(dir, nil); tries != 1 || err == nil ||
		!strings.Contains(err.Error(), "read-only") ||
		strings.Contains(err.Error(), "a job running beside") {
		t.Errorf(
			"read-only storage: %d tries, %v; want one, saying the directory is read-only",
			tries,
			err,
		)
	}
}

// TestUsageCountsASplitBlockOnce: a CP group over two nodes writes each block as two part-files;
// Usage counts the block once, the part-files beside it, and a block whose other part is missing as
// incomplete. It counted every part-file as a block.
func TestUsageCountsASplitBlockOnce(t *testing.T) {
	dir := t.TempDir()
	fan := fmt.Sprintf("%s/%016x/00", dir, uint64(0xabc))
	if err := os.MkdirAll(fan, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0000000000000001.p0of2", "0000000000000001.p1of2", "0000000000000002.p0of2", "0000000000000003"} {
		if err := os.WriteFile(fan+"/"+name+".blk", []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	u, err := Usage(dir)
	if err != nil || len(u) != 1 {
		t.Fatalf("Usage: %+v, %v", u, err)
	}
	if got := u[0]; got.Blocks != 3 || got.PartFiles != 3 || got.Incomplete != 1 || got.Bytes != 4 {
		t.Errorf(
			"%d blocks, %d part-files, %d incomplete, %d bytes; want 3 blocks (one whole), 3 part-files, 1 incomplete, 4 bytes",
			got.Blocks,
			got.PartFiles,
			got.Incomplete,
			got.Bytes,
		)
	}
}
