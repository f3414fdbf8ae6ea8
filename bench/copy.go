package bench

import (
	"bytes"
	"io"
	"sync"
	"time"

	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/pool"
)

// CopyConfig sizes the copy benchmark: one object of TotalBytes on one rank, for every part size
// and layout.
type CopyConfig struct {
	PartBytes  []int64 // sizes of one (page, layer, payload) part
	TotalBytes int64   // bytes one rank copies per iteration: every layer and payload of the object
	Layers     int
	Payloads   int
	CPSize     int // ranks sharing the slab: a rank copies its own 1/CPSize of every slot
	Workers    int // copy goroutines of the engine, and of the memcpy reference
	Iters      int // timed iterations per side per round
	Rounds     int
}

// Validate returns a *errscope.ConfigError naming the first unusable field as its flag of
// `cphicache bench copy`.
func (c CopyConfig) Validate() error {
	if len(c.PartBytes) == 0 {
		return configErrorf("part-sizes", "no part sizes")
	}
	if err := firstBelow(bound{"layers", c.Layers, 1}, bound{"payloads", c.Payloads, 1}, bound{"cp-ranks", c.CPSize, 1},
		bound{"workers", c.Workers, 1}, bound{"iters", c.Iters, 1}, bound{"rounds", c.Rounds, 1}); err != nil {
		return err
	}
	for _, p := range c.PartBytes {
		if p < 1 || c.TotalBytes < p*int64(c.Layers*c.Payloads) {
			return configErrorf(
				"part-sizes",
				"part of %d bytes: total %d bytes must hold at least one page (%d layers x %d payloads)",
				p,
				c.TotalBytes,
				c.Layers,
				c.Payloads,
			)
		}
	}
	return nil
}

// CopyRow is one (layout, direction, part size): our engine's bandwidth beside a memcpy of the same
// bytes.
type CopyRow struct {
	Layout     string  `json:"layout"`
	Direction  string  `json:"direction"` // "D2H" (Gather, backup) or "H2D" (Scatter, load-back)
	PartBytes  int64   `json:"part_bytes"`
	TotalBytes int64   `json:"total_bytes"` // per iteration
	Spans      int     `json:"spans"`       // before the engine coalesces them
	Iters      int     `json:"iters"`
	OursGBps   float64 `json:"ours_gb_per_s"`
	MemcpyGBps float64 `json:"memcpy_gb_per_s"`
	Ratio      float64 `json:"ratio"` // ours / memcpy
	// parts whose bytes differ after the copy, and memcpy mismatches
	WrongParts int64 `json:"wrong"`
}

// copyCase is one geometry: the slab, the engine and the per-layer spans hicache would build for
// one object.
type copyCase struct {
	geometry pool.Geometry
	slab     []byte
	engine   *kernels.HostEngine
	spans    [][]kernels.Span // per layer, as hicache's copy worker issues them
	pages    int
}

// newCopyCase places one object of cfg.TotalBytes at the start of a one-slab pool, on CP rank 0,
// with device pages in ascending order (what a fresh device pool hands out), the device buffer laid
// out [layer][payload][page] as hicache's is, and every span offset taken from
// pool.Geometry.PartOffset.
func newCopyCase(cfg CopyConfig, layout pool.Layout, partBytes int64) (*copyCase, error) {
	pages := int(cfg.TotalBytes / (partBytes * int64(cfg.Layers*cfg.Payloads)))
	g := pool.Geometry{
		CPSize:           cfg.CPSize,
		Layers:           cfg.Layers,
		PayloadsPerLayer: cfg.Payloads,
		PageTokens:       1,
		TokenBytes:       int(partBytes),
		Slots:            pages,
		Layout:           layout,
	}
	g.SlabBytesMax = g.SlotBytes() * int64(pages)
	if err := g.Validate(); err != nil {
		return nil, err
	}
	c := &copyCase{geometry: g, slab: make([]byte, g.SlabBytes(0)), pages: pages}
	var err error
	deviceBytes := int64(cfg.Layers*cfg.Payloads*pages) * partBytes
	if c.engine, err = kernels.NewHostEngine(deviceBytes, [][]byte{c.slab}, cfg.Workers); err != nil {
		return nil, err
	}
	// Both sides hold data before anything is timed: reading never-written memory reads the
	// kernel's shared zero page, which stays in cache and made fresh-buffer copies look faster than
	// memcpy.
	fillPattern(c.slab, 4)
	device := make([]byte, deviceBytes)
	fillPattern(device, 5)
	if err := c.engine.WriteDevice(0, device); err != nil {
		c.engine.Close()
		return nil, err
	}
	c.spans = make([][]kernels.Span, cfg.Layers)
	for layer := range c.spans {
		for page := range pages {
			for payload := range cfg.Payloads {
				c.spans[layer] = append(c.spans[layer], kernels.Span{
					DeviceOffsetBytes: (int64(layer*cfg.Payloads+payload)*int64(pages) + int64(page)) * partBytes,
					SlabOffsetBytes:   g.PartOffset(0, page, 0, layer, payload),
					Bytes:             partBytes,
				})
			}
		}
	}
	return c, nil
}

func (c *copyCase) spanCount() int { return len(c.spans) * len(c.spans[0]) }

// run copies the whole object once, layer by layer, as hicache's copy worker does.
func (c *copyCase) run(gather bool) error {
	for _, spans := range c.spans {
		op := c.engine.Scatter
		if gather {
			op = c.engine.Gather
		}
		if err := op(spans); err != nil {
			return err
		}
	}
	return nil
}

// RunCopy measures Gather (D2H) and Scatter (H2D) for both layouts and every part size, each beside
// a memcpy of the same total bytes timed in the same rounds, and verifies the copied bytes after
// the timed loops.
func RunCopy(cfg CopyConfig) ([]CopyRow, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	src, dst := make([]byte, cfg.TotalBytes), make([]byte, cfg.TotalBytes)
	fillPattern(src, 1)
	var rows []CopyRow
	for _, layout := range []pool.Layout{pool.LayerFirst, pool.PageFirst} {
		for _, partBytes := range cfg.PartBytes {
			c, err := newCopyCase(cfg, layout, partBytes)
			if err != nil {
				return nil, err
			}
			for _, gather := range []bool{true, false} {
				row, err := c.measure(cfg, gather, src, dst)
				if err != nil {
					c.engine.Close()
					return nil, err
				}
				rows = append(rows, row)
			}
			if err := c.engine.Close(); err != nil {
				return nil, err
			}
		}
	}
	return rows, nil
}

func (c *copyCase) measure(cfg CopyConfig, gather bool, src, dst []byte) (CopyRow, error) {
	row := CopyRow{
		Layout:    c.geometry.Layout.String(),
		Direction: "H2D",
		PartBytes: c.geometry.PartBytes(),
		TotalBytes: int64(
			c.pages*cfg.Layers*cfg.Payloads,
		) * c.geometry.PartBytes(),
		Spans: c.spanCount(),
		Iters: cfg.Iters * cfg.Rounds,
	}
	if gather {
		row.Direction = "D2H"
	}
	// One untimed pass of each side first: page faults of fresh buffers are not what is measured.
	if err := c.run(gather); err != nil {
		return row, err
	}
	parallelCopy(dst[:row.TotalBytes], src[:row.TotalBytes], cfg.Workers)
	// Each round times both sides, alternating which goes first; the median round of each side is
	// reported, so that a round slowed by another tenant of the shared machine moves neither
	// number.
	var secondsOurs, secondsCopy []float64
	for round := range cfg.Rounds {
		for side := range 2 {
			start := time.Now()
			if (round+side)%2 == 0 {
				for range cfg.Iters {
					if err := c.run(gather); err != nil {
						return row, err
					}
				}
				secondsOurs = append(secondsOurs, time.Since(start).Seconds())
			} else {
				for range cfg.Iters {
					parallelCopy(dst[:row.TotalBytes], src[:row.TotalBytes], cfg.Workers)
				}
				secondsCopy = append(secondsCopy, time.Since(start).Seconds())
			}
		}
	}
	bytesPerRound := float64(row.TotalBytes) * float64(cfg.Iters)
	row.OursGBps, row.MemcpyGBps = bytesPerRound/median(
		secondsOurs,
	)/1e9, bytesPerRound/median(
		secondsCopy,
	)/1e9
	row.Ratio = row.OursGBps / row.MemcpyGBps
	wrong, err := c.verify(gather, c.spans)
	if !bytes.Equal(dst[:row.TotalBytes], src[:row.TotalBytes]) {
		wrong++
	}
	row.WrongParts = wrong
	return row, err
}

// verify fills the source side with a fresh pattern and the destination with zeros, copies once
// with c.spans, and counts the parts of expected (the spans as they should be) whose destination
// bytes differ from their source bytes.
func (c *copyCase) verify(gather bool, expected [][]kernels.Span) (int64, error) {
	device := make([]byte, c.engine.DeviceBytes())
	if gather {
		fillPattern(device, 2)
		clear(c.slab)
	} else {
		fillPattern(c.slab, 3)
	}
	if err := c.engine.WriteDevice(0, device); err != nil {
		return 0, err
	}
	if err := c.run(gather); err != nil {
		return 0, err
	}
	if err := c.engine.ReadDevice(0, device); err != nil {
		return 0, err
	}
	var wrong int64
	for _, spans := range expected {
		for _, s := range spans {
			if !bytes.Equal(
				device[s.DeviceOffsetBytes:s.DeviceOffsetBytes+s.Bytes],
				c.slab[s.SlabOffsetBytes:s.SlabOffsetBytes+s.Bytes],
			) {
				wrong++
			}
		}
	}
	return wrong, nil
}

// fillPattern writes bytes that differ between neighbouring parts and between seeds, so that a part
// copied to the wrong place, or not at all, is seen.
func fillPattern(b []byte, seed uint64) {
	x := seed*0x9e3779b97f4a7c15 | 1
	for i := 0; i+8 <= len(b); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		for k := range 8 {
			b[i+k] = byte(x >> (8 * k))
		}
	}
	for i := len(b) &^ 7; i < len(b); i++ {
		b[i] = byte(seed)
	}
}

// parallelCopy is the reference: copy() (memmove) of one contiguous buffer, split evenly over the
// same number of goroutines the engine copies on.
func parallelCopy(dst, src []byte, workers int) {
	if workers <= 1 {
		copy(dst, src)
		return
	}
	chunk := (len(src) + workers - 1) / workers
	var wg sync.WaitGroup
	for lo := chunk; lo < len(src); lo += chunk {
		hi := min(lo+chunk, len(src))
		wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
	}
	copy(dst[:chunk], src[:chunk])
	wg.Wait()
}

var copyTable = table{
	{
		"layout",
		"",
		"%s",
		11,
	}, {"dir", "", "%s", 4}, {"part", "(B)", "%d", 8}, {"total", "(B)", "%d", 10},
	{
		"spans",
		"",
		"%d",
		7,
	}, {"iters", "", "%d", 6}, {"ours", "(GB/s)", "%.2f", 8}, {"memcpy", "(GB/s)", "%.2f", 8},
	{"ours/memcpy", "", "%.3f", 11}, {"#wrong", "", "%d", 6},
}

// WriteCopyTable prints the rows: ours = kernels.HostEngine Gather (D2H) / Scatter (H2D) per layer,
// memcpy = copy() of the same total bytes in one contiguous buffer.
func WriteCopyTable(w io.Writer, rows []CopyRow) {
	copyTable.writeHeader(w)
	for _, r := range rows {
		copyTable.writeRow(
			w,
			r.Layout,
			r.Direction,
			r.PartBytes,
			r.TotalBytes,
			r.Spans,
			r.Iters,
			r.OursGBps,
			r.MemcpyGBps,
			r.Ratio,
			r.WrongParts,
		)
	}
}

// CopyWrong sums the #wrong column.
func CopyWrong(rows []CopyRow) int64 {
	var n int64
	for _, r := range rows {
		n += r.WrongParts
	}
	return n
}
