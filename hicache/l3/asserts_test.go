package l3

import (
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/pool"
)

func panicMessage(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg, _ = p.(string)
		}
	}()
	f()
	return ""
}

// TestBrokenBlockInvariantsDumpWhatTheyChecked: a part of a block that would fall outside its slab
// (a slab mapped shorter than its geometry says), and an LRU entry of a negative size, panic naming
// the invariant with a dump of what was checked (DESIGN.md, "Asserts"), rather than a bare
// slice-bounds panic or a budget gone wrong.
func TestBrokenBlockInvariantsDumpWhatTheyChecked(t *testing.T) {
	g := pool.Geometry{
		CPSize:           2,
		Layers:           2,
		PayloadsPerLayer: 2,
		PageTokens:       2,
		TokenBytes:       8,
		Slots:            8,
		Layout:           pool.LayerFirst,
	}
	g.SlabBytesMax = int64(g.Slots) * g.SlotBytes()
	ns := Namespace{
		Layers:     g.Layers,
		Payloads:   g.PayloadsPerLayer,
		PageTokens: g.PageTokens,
		TokenBytes: g.TokenBytes,
		CPSize:     g.CPSize,
		Name:       "t",
	}
	s := &Store{ns: ns, fingerprint: ns.Fingerprint()}
	short := Slabs{Geometry: g, Mem: [][]byte{make([]byte, g.SlabBytes(0)/2)}}
	var buf []byte
	msg := panicMessage(
		func() { _, _ = s.GatherFromSlab([]l3block.PageSlot{{Slab: 0, Slot: 6}}, short, &buf) },
	)
	for _, want := range []string{"l3: broken invariant", "outside them", "of slab 0 (", "2 tokens, payload 128 bytes", "namespace: "} {
		if !strings.Contains(msg, want) {
			t.Errorf("a part outside its slab: the panic %q does not say %q", msg, want)
		}
	}
	l := newLRU()
	msg = panicMessage(func() { l.use(0xab, -1, time.Unix(1, 0)) })
	for _, want := range []string{"l3: broken invariant", "entered with -1 bytes", "LRU: 0 entries in the heap, 0 by key, 0 bytes"} {
		if !strings.Contains(msg, want) {
			t.Errorf("a negative LRU entry: the panic %q does not say %q", msg, want)
		}
	}
}
