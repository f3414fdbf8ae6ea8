package l3

import (
	"reflect"
	"testing"
)

// TestUsageAndClear: Usage counts each namespace's blocks and bytes and names it; Clear removes one namespace
// or all, and nothing else in the directory.
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
	if ua.Blocks != 3 || ua.Bytes != 3*blockFileBytes || ua.Description != testNS.String() || !ua.Oldest.Before(ua.Newest) {
		t.Errorf("namespace a: %+v", ua)
	}
	if ub.Blocks != 1 || ub.Description != other.String() || !ub.Oldest.Equal(ub.Newest) {
		t.Errorf("namespace b: %+v", ub)
	}
	fp := a.Fingerprint()
	if removed, err := Clear(dir, &fp); err != nil || !reflect.DeepEqual(removed, []uint64{fp}) || a.Exists(1) || !b.Exists(1) {
		t.Errorf("Clear one: %x, %v", removed, err)
	}
	if removed, err := Clear(dir, nil); err != nil || len(removed) != 1 || b.Exists(1) {
		t.Errorf("Clear all: %x, %v", removed, err)
	}
	if u, err := Usage(dir); err != nil || len(u) != 0 {
		t.Errorf("Usage after Clear: %+v, %v", u, err)
	}
	mustWrite(t, a, 4) // a Store outlives a Clear: its directory comes back
	if !a.Exists(4) {
		t.Error("a write after Clear is lost")
	}
}
