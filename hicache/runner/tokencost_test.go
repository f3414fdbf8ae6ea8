package runner

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/hicache/l3block"
	"github.com/cphicache/cphicache/pool"
)

// BenchmarkTokenCost: the time one token's KV takes the CPU build by each of the replay's ways into
// the L2 and back out, on the shapes of the shared-trace replay (cp 8 on one node, one layer, K and
// V, 64-token pages of 8-byte parts, 512-token blocks of 64 KiB, a 256 MiB slab, 4 MiB of device
// pages a rank), all ranks' parts on one goroutine:
//
//   - computed (the L2-only replay's 75%): fill the parts on the device, copy them into the slab
//     (the backup), check them there (the commit audit);
//   - written through to the L3 (the empty-L3 replay's computed tokens, 36%): what the L3 write
//     adds to a computed token, on the writer's goroutine: gather the block from the slab, check it
//     against its content (the audit extended to the L3), create, write and publish its file (a new
//     one each time);
//   - an L3 hit (the filled-L3 replay's 74%): read the block from the page cache, verify its
//     checksum and scatter it into the slab (Store.ReadIntoSlab), copy the parts to the device (the
//     load-back), check them there (its verification).
//
// The sides take turns block by block, which goes first alternating, each over device pages and
// slab slots of its own drawn at random (the memory is touched once before, so no page fault is
// timed), and the benchmark reports their ratios measured in the same run. l3/computed above 1: a
// replay that reads a token from the L3 instead of computing it cannot be faster in this build,
// whose "computing" is a fill at memory speed rather than a GPU's prefill;
// (computed+write)/computed is what writing through costs a computed token.
//
// Closer to the replay than not, but not the replay: the write skips the Exists check before it and
// never evicts; a side's fill, copy and check follow each other while the replay spreads them over
// steps; copies go a part at a time, where the replay coalesces runs. The times are wall clock: a
// busy machine widens them. Its files go under $TMPDIR, b.N + 1024 of 64 KiB, removed at the end;
// on an ext4 without a journal (this project's machines) creating a file is dear for a few minutes
// after many were removed, this benchmark's own included, so TMPDIR=/dev/shm gives the steadier
// write figure. Not a test: `go test ./hicache/runner -run '^$' -bench TokenCost`.
func BenchmarkTokenCost(b *testing.B) {
	tc := newTokenCost(b)
	rng := rand.New(rand.NewPCG(3, 4))
	var computedTime, writeTime, l3Time time.Duration
	type step struct {
		run  func(blk, firstPage, firstSlot int)
		took *time.Duration
	}
	sides := [][]step{
		{{tc.computed, &computedTime}, {tc.writeThrough, &writeTime}},
		{{tc.fromL3, &l3Time}},
	}
	for i := 0; b.Loop(); i++ {
		for k := range sides {
			side := sides[(i+k)%len(sides)] // which goes first alternates
			blk := rng.IntN(len(tc.tokens))
			page, slot := rng.IntN(
				tokenCostDevicePages-tokenCostBlockPages+1,
			), rng.IntN(
				tc.g.Slots-tokenCostBlockPages+1,
			)
			for _, s := range side {
				start := time.Now()
				s.run(blk, page, slot)
				*s.took += time.Since(start)
			}
		}
	}
	n := float64(b.N) * float64(tc.blockTokens())
	b.ReportMetric(float64(computedTime.Nanoseconds())/n, "computed-ns/token")
	b.ReportMetric(float64(writeTime.Nanoseconds())/n, "write-ns/token")
	b.ReportMetric(float64(l3Time.Nanoseconds())/n, "l3-ns/token")
	b.ReportMetric(
		float64(computedTime+writeTime)/float64(computedTime),
		"(computed+write)/computed",
	)
	b.ReportMetric(float64(l3Time)/float64(computedTime), "l3/computed")
}

const (
	tokenCostBlockPages  = 8    // a 512-token block
	tokenCostDevicePages = 4096 // a rank's device pages
	tokenCostBlocks      = 1024 // the L3's blocks, 64 MiB
)

// tokenCost is the benchmark's L2, device pages and L3 store, and the stored blocks' tokens.
type tokenCost struct {
	b         *testing.B
	g         pool.Geometry
	parts     pool.PartMap
	slabs     l3.Slabs
	device    [][]byte // a rank's pages, each its K part then its V part
	store     *l3.Store
	tokens    [][]int32 // block i is stored under key i+1
	partRanks []int
	buf, wbuf []byte
	written   uint64 // the last key written through
}

func newTokenCost(b *testing.B) *tokenCost {
	g := pool.Geometry{
		CPSize:           8,
		Layers:           1,
		PayloadsPerLayer: 2,
		PageTokens:       64,
		TokenBytes:       8,
		Slots:            32768,
		SlabBytesMax:     1 << 40,
		Layout:           pool.LayerFirst,
	}
	o := config.L3Options{Dir: b.TempDir()}
	store, err := l3.Open(o.Dir, o.BlockNamespace(g, 1), l3.Unbounded)
	if err != nil {
		b.Fatal(err)
	}
	tc := &tokenCost{
		b:       b,
		g:       g,
		parts:   g.PartMap(),
		slabs:   l3.Slabs{Geometry: g, Mem: [][]byte{make([]byte, g.SlabBytes(0))}},
		store:   store,
		tokens:  make([][]int32, tokenCostBlocks),
		written: tokenCostBlocks,
	}
	for r := range g.CPSize {
		tc.device = append(
			tc.device,
			make([]byte, tokenCostDevicePages*int64(g.PayloadsPerLayer)*g.PartBytes()),
		)
		tc.partRanks = append(tc.partRanks, r)
	}
	for _, mem := range append([][]byte{tc.slabs.Mem[0]}, tc.device...) {
		for i := 0; i < len(mem); i += 4096 { // the first touch of every page, untimed
			mem[i] = 1
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for blk := range tc.tokens { // stored from the slab, as the replay's writes store them
		tc.tokens[blk] = make([]int32, tc.blockTokens())
		for i := range tc.tokens[blk] {
			tc.tokens[blk][i] = rng.Int32N(32000)
		}
		tc.eachPart(blk, 0, 0, func(toks []int32, pos int, _, slab []byte, k cache.ContentKey) {
			cache.FillPart(slab, toks, pos, g.TokenBytes, k)
		})
		if err := store.WriteFromSlab(uint64(blk+1), tokenCostPages(0), tc.slabs, &tc.buf, false); err != nil {
			b.Fatal(err)
		}
	}
	return tc
}

func (tc *tokenCost) blockTokens() int { return tokenCostBlockPages * tc.g.PageTokens }

func tokenCostPages(firstSlot int) []l3block.PageSlot {
	pages := make([]l3block.PageSlot, tokenCostBlockPages)
	for i := range pages {
		pages[i] = l3block.PageSlot{Slot: int32(firstSlot + i)}
	}
	return pages
}

// eachPart visits block blk's parts, a page's part of a rank's payload at a time: its tokens and
// their first position, its place on the rank's device pages from firstPage on, and in the slab
// from firstSlot on.
func (tc *tokenCost) eachPart(
	blk, firstPage, firstSlot int,
	visit func(toks []int32, pos int, dev, slab []byte, k cache.ContentKey),
) {
	g, partBytes := tc.g, tc.g.PartBytes()
	for r := range g.CPSize {
		for p := range g.PayloadsPerLayer {
			for page := range tokenCostBlockPages {
				dev := (int64(firstPage+page)*int64(g.PayloadsPerLayer) + int64(p)) * partBytes
				slab := tc.parts.Offset(0, firstSlot+page, r, 0, p)
				pos := page * g.PageTokens
				visit(
					tc.tokens[blk][pos:pos+g.PageTokens],
					pos,
					tc.device[r][dev:dev+partBytes],
					tc.slabs.Mem[0][slab:slab+partBytes],
					cache.ContentKey{Seed: 1, Rank: r, Payload: p},
				)
			}
		}
	}
}

func (tc *tokenCost) check(ok bool, where string) {
	if !ok {
		tc.b.Fatalf("%s: a part is not its content", where)
	}
}

// computed fills the block's parts on the device, backs them up into the slab and audits them
// there.
func (tc *tokenCost) computed(blk, firstPage, firstSlot int) {
	tb := tc.g.TokenBytes
	tc.eachPart(
		blk,
		firstPage,
		firstSlot,
		func(toks []int32, pos int, dev, _ []byte, k cache.ContentKey) {
			cache.FillPart(dev, toks, pos, tb, k)
		},
	)
	tc.eachPart(
		blk,
		firstPage,
		firstSlot,
		func(_ []int32, _ int, dev, slab []byte, _ cache.ContentKey) { copy(slab, dev) },
	)
	tc.eachPart(
		blk,
		firstPage,
		firstSlot,
		func(toks []int32, pos int, _, slab []byte, k cache.ContentKey) {
			tc.check(cache.PartMatches(slab, toks, pos, tb, k), "the audit of a computed block")
		},
	)
}

// writeThrough stores the block computed just before from the slab as a new block, as l3IO.write
// does.
func (tc *tokenCost) writeThrough(blk, _, firstSlot int) {
	payload, err := tc.store.GatherFromSlab(tokenCostPages(firstSlot), tc.slabs, &tc.wbuf)
	if err != nil {
		tc.b.Fatal(err)
	}
	tc.check(
		blockMatches(
			payload,
			&cache.BlockWrite{Tokens: tc.tokens[blk]},
			tc.store.Namespace(),
			1,
			tc.partRanks,
		),
		"the write's check",
	)
	tc.written++
	if err := tc.store.Write(tc.written, tc.blockTokens(), payload, false); err != nil {
		tc.b.Fatal(err)
	}
}

// fromL3 reads the stored block into the slab, loads its parts back to the device and verifies them
// there.
func (tc *tokenCost) fromL3(blk, firstPage, firstSlot int) {
	if err := tc.store.ReadIntoSlab(uint64(blk+1), tokenCostPages(firstSlot), tc.slabs, &tc.buf); err != nil {
		tc.b.Fatal(err)
	}
	tb := tc.g.TokenBytes
	tc.eachPart(
		blk,
		firstPage,
		firstSlot,
		func(_ []int32, _ int, dev, slab []byte, _ cache.ContentKey) { copy(dev, slab) },
	)
	tc.eachPart(
		blk,
		firstPage,
		firstSlot,
		func(toks []int32, pos int, dev, _ []byte, k cache.ContentKey) {
			tc.check(cache.PartMatches(dev, toks, pos, tb, k), "the load-back of an L3 block")
		},
	)
}
