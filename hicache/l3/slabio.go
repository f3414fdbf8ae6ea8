package l3

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/pool"
)

// Slabs is the shared L2 as the block I/O sees it: its geometry and every slab mapped.
type Slabs struct {
	Geometry pool.Geometry
	Mem      [][]byte
}

// checkSlabs refuses an L2 whose bytes a block of this namespace could not describe: the canonical
// order holds every layer's and payload's part of the file's ranks (a node's, on a group over
// several), each PageTokens x TokenBytes per page, as the node's slab does.
func (s *Store) checkSlabs(sl Slabs, pages []l3block.PageSlot) error {
	g, ns := sl.Geometry, s.ns
	if g.CPSize != ns.CPSize || g.Layers != ns.Layers || g.PayloadsPerLayer != ns.Payloads ||
		g.PageTokens != ns.PageTokens ||
		g.TokenBytes != ns.TokenBytes ||
		g.NodeParts() != ns.FileParts() {
		return fmt.Errorf(
			"l3: the L2 geometry (cp %d over %d nodes, layers %d, payloads %d, page tokens %d, token bytes %d) is not the namespace's %s",
			g.CPSize,
			max(1, g.Nodes),
			g.Layers,
			g.PayloadsPerLayer,
			g.PageTokens,
			g.TokenBytes,
			ns,
		)
	}
	if len(pages) == 0 {
		return fmt.Errorf("l3: a block of no pages")
	}
	return nil
}

// GatherFromSlab copies the file's ranks' parts of pages (in block order) from the L2 into the
// canonical order in buf (grown as needed and kept by the caller for the next block) and returns
// the payload, for Write. The caller guarantees that nobody writes those slots meanwhile (the L2
// objects are protected).
func (s *Store) GatherFromSlab(pages []l3block.PageSlot, sl Slabs, buf *[]byte) ([]byte, error) {
	if err := s.checkSlabs(sl, pages); err != nil {
		return nil, err
	}
	payload := grow(buf, s.ns.PayloadBytes(len(pages)*s.ns.PageTokens))
	s.eachPart(sl, pages, func(canonical, slabOffset int64, slab int32, partBytes int64) {
		copy(payload[canonical:canonical+partBytes], sl.Mem[slab][slabOffset:slabOffset+partBytes])
	})
	return payload, nil
}

// WriteFromSlab stores key's block from the L2: GatherFromSlab, then Write.
func (s *Store) WriteFromSlab(
	key uint64,
	pages []l3block.PageSlot,
	sl Slabs,
	buf *[]byte,
	fsync bool,
) error {
	payload, err := s.GatherFromSlab(pages, sl, buf)
	if err != nil {
		return err
	}
	return s.Write(key, len(pages)*s.ns.PageTokens, payload, fsync)
}

// ReadBlock loads key's block of pageCount pages into buf (grown as needed) and returns its
// verified payload: Read, with a block of another length under the key a miss (the key names the
// tokens, so it is a different block size).
func (s *Store) ReadBlock(key uint64, pageCount int, buf *[]byte) ([]byte, error) {
	tokenCount := pageCount * s.ns.PageTokens
	payload := grow(buf, s.ns.PayloadBytes(tokenCount))
	got, err := s.Read(key, payload)
	if err != nil {
		return nil, err
	}
	if got != tokenCount {
		return nil, &MissError{Key: key}
	}
	if int64(len(payload)) != s.ns.PayloadBytes(tokenCount) {
		panic(
			brokenBlock(
				header{
					key:          key,
					fingerprint:  s.fingerprint,
					tokenCount:   uint64(got),
					payloadBytes: uint64(len(payload)),
				},
				s.ns,
				"a block of %d pages read into %d bytes",
				pageCount,
				len(payload),
			),
		)
	}
	return payload, nil
}

// ScatterIntoSlab copies a verified payload (ReadBlock's) into the L2 slots of pages, the file's
// ranks' parts.
func (s *Store) ScatterIntoSlab(payload []byte, pages []l3block.PageSlot, sl Slabs) error {
	if err := s.checkSlabs(sl, pages); err != nil {
		return err
	}
	if want := s.ns.PayloadBytes(len(pages) * s.ns.PageTokens); int64(len(payload)) != want {
		return fmt.Errorf(
			"l3: scatter of %d bytes into %d pages, which hold %d",
			len(payload),
			len(pages),
			want,
		)
	}
	s.eachPart(sl, pages, func(canonical, slabOffset int64, slab int32, partBytes int64) {
		copy(sl.Mem[slab][slabOffset:slabOffset+partBytes], payload[canonical:canonical+partBytes])
	})
	return nil
}

// ReadIntoSlab loads key's block into the L2 slots of pages, in block order, the file's ranks'
// parts: ReadBlock, then ScatterIntoSlab. Nothing reaches the slab unless the whole block verified;
// a miss or a corrupt block is Read's error (IsMiss), and the slots are left as they were.
func (s *Store) ReadIntoSlab(key uint64, pages []l3block.PageSlot, sl Slabs, buf *[]byte) error {
	if err := s.checkSlabs(sl, pages); err != nil {
		return err
	}
	payload, err := s.ReadBlock(key, len(pages), buf)
	if err != nil {
		return err
	}
	return s.ScatterIntoSlab(payload, pages, sl)
}

// eachPart visits every (page, rank, layer, payload) part of a block file (rank: the node-local
// part): where it is in the canonical payload and where in the slab, a run at a time: under
// layer_first, pages in consecutive slots of one slab have their parts of one rank, layer and
// payload side by side in the slab as in the block, so one visit covers the run (the L2's objects
// are mostly runs of slots; a visit a part was most of a block read's CPU at small parts).
func (s *Store) eachPart(
	sl Slabs,
	pages []l3block.PageSlot,
	visit func(canonical, slabOffset int64, slab int32, bytes int64),
) {
	g := sl.Geometry
	parts := g.PartMap()
	partBytes := g.PartBytes()
	tokenCount := len(pages) * s.ns.PageTokens
	blockBytes := s.ns.PayloadBytes(tokenCount)
	// the file's ranks: its node's parts, in node-local order
	for rank := 0; rank < g.NodeParts(); rank++ {
		for layer := 0; layer < g.Layers; layer++ {
			for payload := 0; payload < g.PayloadsPerLayer; payload++ {
				base := s.ns.PartOffset(tokenCount, rank, layer, payload)
				for from := 0; from < len(pages); {
					to := from + 1
					for g.Layout == pool.LayerFirst && to < len(pages) && pages[to].Slab == pages[from].Slab &&
						int(pages[to].Slot) == int(pages[from].Slot)+(to-from) {
						to++
					}
					p := pages[from]
					canonical, slabOffset, runBytes := base+int64(
						from,
					)*partBytes, parts.Offset(
						int(p.Slab),
						int(p.Slot),
						rank,
						layer,
						payload,
					), int64(
						to-from,
					)*partBytes
					if canonical < 0 || canonical+runBytes > blockBytes || slabOffset < 0 ||
						slabOffset+runBytes > int64(len(sl.Mem[p.Slab])) {
						panic(
							brokenBlock(
								header{
									fingerprint:  s.fingerprint,
									tokenCount:   uint64(tokenCount),
									payloadBytes: uint64(blockBytes),
								},
								s.ns,
								"part (rank %d, layer %d, payload %d) of pages [%d, %d) at [%d, %d) of the block and [%d, %d) of slab %d (%d bytes): outside them",
								rank,
								layer,
								payload,
								from,
								to,
								canonical,
								canonical+runBytes,
								slabOffset,
								slabOffset+runBytes,
								p.Slab,
								len(sl.Mem[p.Slab]),
							),
						)
					}
					visit(canonical, slabOffset, p.Slab, runBytes)
					from = to
				}
			}
		}
	}
}

func grow(buf *[]byte, n int64) []byte {
	if int64(cap(*buf)) < n {
		*buf = make([]byte, n)
	}
	return (*buf)[:n]
}
