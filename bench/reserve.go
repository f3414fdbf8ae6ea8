package bench

import (
	"io"
	"time"

	"github.com/cphicache/cphicache/pool"
)

// ReserveConfig sizes the allocator benchmark.
type ReserveConfig struct {
	SlotsLog2 []int // pool sizes, as log2 of the slots
	Pages     []int // object sizes in pages
	// each cell runs batches of reserveBatch ops for about this long, in reserveRounds rounds
	MinSeconds float64
}

// reserveBatch ops run between two looks at the clock, so that reading it costs nothing measurable.
const reserveBatch = 1024

// reserveFillPages is the object size that fills the lower half of the pool before a cell is timed,
// as pool/bench_test.go does, so the search runs through summary levels and populated tables.
const reserveFillPages = 64

// Validate returns an error naming the first unusable field.
func (c ReserveConfig) Validate() error {
	switch {
	case len(c.SlotsLog2) == 0:
		return configErrorf("slots-log2", "no pool sizes")
	case len(c.Pages) == 0:
		return configErrorf("pages", "no object sizes")
	case c.MinSeconds <= 0:
		return configErrorf("min-seconds", "%g: the time per cell must be positive", c.MinSeconds)
	}
	for _, s := range c.SlotsLog2 {
		if s < 1 || s > 30 {
			return configErrorf("slots-log2", "pool of 2^%d slots: use 1 to 30", s)
		}
		for _, p := range c.Pages {
			if p < 1 || p > (1<<s)/2 {
				return configErrorf(
					"pages",
					"object of %d pages does not fit in the free half of a pool of 2^%d slots",
					p,
					s,
				)
			}
		}
	}
	return nil
}

// ReserveRow is one (pool size, object size): allocator ops per second, one op being one object's
// life on the hot path (Reserve, MarkObjectCommitted, Release).
type ReserveRow struct {
	SlotsLog2    int     `json:"slots_log2"`
	Pages        int     `json:"pages"`
	Ops          int64   `json:"ops"`
	OpsPerSecond float64 `json:"ops_per_s"`
	NsPerOp      float64 `json:"ns_per_op"`
	// ops/s over the smallest pool's ops/s at the same object size
	VsSmallest float64 `json:"vs_smallest_pool"`
	// reservations that failed, and free slots not restored
	Wrong int64 `json:"wrong"`
}

// reserveGeometry mirrors pool/bench_test.go: 8 CP ranks, slabs of 2^20 slots, so large pools have
// several.
func reserveGeometry(slots int) pool.Geometry {
	return pool.Geometry{
		CPSize:           8,
		Layers:           1,
		PayloadsPerLayer: 2,
		PageTokens:       1,
		TokenBytes:       1,
		Slots:            slots,
		SlabBytesMax:     16 << 20,
	}
}

// RunReserve measures every pool size and object size on one rank. All pools are built first and
// every round visits every cell, the starting cell rotating from round to round, so that a change
// in the shared machine's load during the run hits every pool size alike instead of whichever was
// being measured then: the vs-smallest column compares cells measured side by side.
func RunReserve(cfg ReserveConfig) ([]ReserveRow, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var cells []*reserveCell
	for _, slotsLog2 := range cfg.SlotsLog2 {
		a, err := newHalfFullPool(1 << slotsLog2)
		if err != nil {
			return nil, err
		}
		for _, pages := range cfg.Pages {
			cells = append(cells, newReserveCell(a, slotsLog2, pages))
		}
	}
	roundSeconds := cfg.MinSeconds / reserveRounds
	for round := range reserveRounds {
		for k := range cells {
			cells[(round+k)%len(cells)].runRound(roundSeconds)
		}
	}
	rows := make([]ReserveRow, len(cells))
	smallest := map[int]float64{}
	for i, c := range cells {
		rows[i] = c.finish()
		if _, ok := smallest[rows[i].Pages]; !ok {
			smallest[rows[i].Pages] = rows[i].OpsPerSecond
		}
		rows[i].VsSmallest = rows[i].OpsPerSecond / smallest[rows[i].Pages]
	}
	return rows, nil
}

func newHalfFullPool(slots int) (*pool.Allocator, error) {
	a, err := pool.New(reserveGeometry(slots))
	if err != nil {
		return nil, err
	}
	fill := min(reserveFillPages, max(1, slots/8))
	for id := pool.ObjectID(1 << 40); a.FreeSlots()-fill >= slots/2; id++ {
		if _, err := a.Reserve(id, fill, 0, 0); err != nil {
			return nil, err
		}
		if err := a.MarkObjectCommitted(id); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// reserveRounds splits a cell's time into rounds; the median round's rate is reported, so that a
// round slowed by another tenant of the shared machine does not move the number.
const reserveRounds = 5

// reserveCell is one (pool, object size) under measurement. Cells of one pool share its allocator;
// each op gives back what it took, so they do not disturb each other. A failed op counts as wrong
// and is not retried: with half the pool free every reservation must succeed without eviction.
type reserveCell struct {
	a          *pool.Allocator
	row        ReserveRow
	freeBefore int
	nextID     pool.ObjectID
	rates      []float64
}

// newReserveCell runs one untimed batch, so that the first timed round does not pay for first
// touches.
func newReserveCell(a *pool.Allocator, slotsLog2, pages int) *reserveCell {
	c := &reserveCell{
		a:          a,
		row:        ReserveRow{SlotsLog2: slotsLog2, Pages: pages},
		freeBefore: a.FreeSlots(),
	}
	c.row.Wrong += reserveBatchOps(a, &c.nextID, pages)
	return c
}

// runRound runs whole batches until seconds have passed and records the round's rate.
func (c *reserveCell) runRound(seconds float64) {
	start := time.Now()
	var ops int64
	var elapsed float64
	for ; elapsed < seconds; elapsed = time.Since(start).Seconds() {
		c.row.Wrong += reserveBatchOps(c.a, &c.nextID, c.row.Pages)
		ops += reserveBatch
	}
	c.row.Ops += ops
	c.rates = append(c.rates, float64(ops)/elapsed)
}

// finish checks that the pool got every slot back and reports the median round.
func (c *reserveCell) finish() ReserveRow {
	if c.a.FreeSlots() != c.freeBefore {
		c.row.Wrong++
	}
	c.row.OpsPerSecond = median(c.rates)
	c.row.NsPerOp = 1e9 / c.row.OpsPerSecond
	return c.row
}

// reserveBatchOps runs reserveBatch object lives with fresh ids and returns how many failed.
func reserveBatchOps(a *pool.Allocator, id *pool.ObjectID, pages int) int64 {
	var wrong int64
	for range reserveBatch {
		if outcome, err := a.Reserve(*id, pages, uint64(*id), uint64(*id)); err != nil ||
			outcome != pool.Reserved {
			wrong++
		} else if a.MarkObjectCommitted(*id) != nil || a.Release(*id) != nil {
			wrong++
		}
		*id++
	}
	return wrong
}

var reserveTable = table{
	{"slots", "(log2)", "%d", 6}, {"pages", "(/object)", "%d", 9}, {"ops", "", "%d", 10},
	{
		"rate",
		"(ops/s)",
		"%.0f",
		11,
	}, {"time", "(ns/op)", "%.1f", 9}, {"vs-smallest", "(ratio)", "%.3f", 11},
	{"#wrong", "", "%d", 6},
}

// WriteReserveTable prints the rows; one op = Reserve + MarkObjectCommitted + Release of one
// object.
func WriteReserveTable(w io.Writer, rows []ReserveRow) {
	reserveTable.writeHeader(w)
	for _, r := range rows {
		reserveTable.writeRow(
			w,
			r.SlotsLog2,
			r.Pages,
			r.Ops,
			r.OpsPerSecond,
			r.NsPerOp,
			r.VsSmallest,
			r.Wrong,
		)
	}
}

// ReserveWrong sums the #wrong column.
func ReserveWrong(rows []ReserveRow) int64 {
	var n int64
	for _, r := range rows {
		n += r.Wrong
	}
	return n
}
