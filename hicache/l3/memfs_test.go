package l3

import (
	"bytes"
	"errors"
	"testing"
)

// The Store on MemFS, the filesystem the simulator runs it on: the same guarantees as on a disk,
// and each of MemFS's faults meets the check that exists for it.
func TestStoreOnMemFSKeepsItsGuarantees(t *testing.T) {
	m := NewMemFS()
	if err := m.MkdirAll("/l3", 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := OpenFS(m, "/l3", testNS, Unbounded)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte{7}, int(testNS.PayloadBytes(8)))
	for key := uint64(1); key <= 4; key++ {
		if err := s.Write(key, 8, payload, true); err != nil {
			t.Fatal(err)
		}
	}
	buf := []byte(nil)
	if got, err := s.ReadBlock(1, 2, &buf); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("round trip: %v", err)
	}
	m.Corrupt(s.BlockPath(2))
	m.Truncate(s.BlockPath(3))
	m.MakeNonRegular(s.BlockPath(4))
	for key := uint64(2); key <= 4; key++ {
		var corrupt *CorruptError
		if _, err := s.ReadBlock(key, 2, &buf); !errors.As(err, &corrupt) {
			t.Errorf("block %d: %v, want a corrupt block", key, err)
		}
		if s.Exists(key) {
			t.Errorf("block %d: still there after it read corrupt", key)
		}
	}
	eio := errors.New("EIO")
	m.Inject = func(op, _ string) error {
		if op == "read" {
			return eio
		}
		return nil
	}
	if _, err := s.ReadBlock(1, 2, &buf); !errors.Is(err, eio) || !s.Exists(1) {
		t.Errorf(
			"a read that fails with EIO: %v; the block must stay (exists %v)",
			err,
			s.Exists(1),
		)
	}
	m.Inject = func(op, _ string) error {
		if op == "write" {
			return errors.New("ENOSPC")
		}
		return nil
	}
	var we *WriteError
	if err := s.Write(9, 8, payload, false); !errors.As(err, &we) || s.Exists(9) ||
		len(m.Files("/l3")) != 2 {
		t.Errorf(
			"a write on a full filesystem: %v, exists %v, files %v: want a WriteError and no file left",
			err,
			s.Exists(9),
			m.Files("/l3"),
		)
	}
	if c := s.Counters(); c.Corrupt != 3 || c.Writes != 4 {
		t.Errorf("counters %+v: want 3 corrupt, 4 writes", c)
	}
}
