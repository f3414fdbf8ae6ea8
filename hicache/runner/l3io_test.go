package runner

import (
	"bytes"
	"testing"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/pool"
)

// TestAGivenUpReadNeverWritesTheSlab: a read lands from its own goroutine, so the deadline and the
// read race for its state word; a read its deadline gave up (the core was told: a miss, its slots
// soon someone else's) must leave the slab as it was when its file finally returns, and a read
// still in flight lands whole.
func TestAGivenUpReadNeverWritesTheSlab(t *testing.T) {
	g := pool.Geometry{
		CPSize:           2,
		Layers:           1,
		PayloadsPerLayer: 2,
		PageTokens:       4,
		TokenBytes:       8,
		Slots:            8,
		SlabBytesMax:     1 << 20,
	}
	ns := l3.Namespace{
		Layers:     g.Layers,
		Payloads:   g.PayloadsPerLayer,
		PageTokens: g.PageTokens,
		TokenBytes: g.TokenBytes,
		CPSize:     g.CPSize,
		Name:       "test",
	}
	store, err := l3.Open(t.TempDir(), ns, l3.Unbounded)
	if err != nil {
		t.Fatal(err)
	}
	pages := []cache.SlabSlot{{Slab: 0, Slot: 3}, {Slab: 0, Slot: 4}}
	payload := make([]byte, ns.PayloadBytes(len(pages)*g.PageTokens))
	for i := range payload {
		payload[i] = byte(i%251 + 1)
	}
	if err := store.Write(7, len(pages)*g.PageTokens, payload, false); err != nil {
		t.Fatal(err)
	}
	for _, abandoned := range []bool{true, false} {
		slab := make([]byte, g.SlabBytes(0))
		io := &l3IO{
			store: store,
			slabs: l3.Slabs{Geometry: g, Mem: [][]byte{slab}},
			bufs:  make(chan *[]byte, 4),
		}
		p := &pendingRead{read: &cache.BlockRead{Prefetch: 1, Block: 0, Key: 7, Pages: pages}}
		if abandoned && !p.state.CompareAndSwap(readInFlight, readAbandoned) {
			t.Fatal("a fresh read is not in flight")
		}
		done := io.read(p)
		zero := bytes.Count(slab, []byte{0}) == len(slab)
		switch {
		case abandoned && !zero:
			t.Error("a read given up at its deadline wrote the slab when its file returned")
		case !abandoned && (zero || done.Err != nil || done.read.bytes != int64(len(payload))):
			t.Errorf(
				"a read in flight did not land: error %v, %d bytes, slab untouched %v",
				done.Err,
				done.read.bytes,
				zero,
			)
		}
	}
}
