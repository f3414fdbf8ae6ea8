package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/cphicache/cphicache/mpi"
)

// AllreduceConfig sizes the all-reduce benchmark. Counts are uint64 elements.
type AllreduceConfig struct {
	MinCount, MaxCount int // both powers of two
	CountFactor        int // each count is the previous one times this (2 or 4)
	Iters              int // timed calls per side per round, for messages up to largeMessageBytes
	ItersLarge         int // timed calls per side per round above largeMessageBytes
	Warmup             int // untimed calls before each timed loop
	// rounds per size; each round times both sides, alternating which goes first
	Rounds int
	// GapMicroseconds 0 times calls back to back, as OSU does. A positive gap spins that long and
	// enters a barrier before every call, and times each call alone: a call made between stretches
	// of other work, as writing_check is.
	GapMicroseconds float64
}

// largeMessageBytes is where OSU's benchmarks switch to their smaller iteration count: above it a
// call costs tens of microseconds or more, and fewer calls give the same precision.
const largeMessageBytes = 8 << 10

// Validate returns a *errscope.ConfigError naming the first unusable field as its flag of
// `cphicache bench allreduce`.
func (c AllreduceConfig) Validate() error {
	switch {
	case c.MinCount < 1 || c.MinCount&(c.MinCount-1) != 0:
		return configErrorf("min-size", "min count %d is not a power of two", c.MinCount)
	case c.MaxCount < c.MinCount || c.MaxCount&(c.MaxCount-1) != 0:
		return configErrorf(
			"max-size",
			"max count %d is not a power of two of at least min count %d",
			c.MaxCount,
			c.MinCount,
		)
	case c.CountFactor != 2 && c.CountFactor != 4:
		return configErrorf("step-factor", "count factor %d: use 2 or 4", c.CountFactor)
	case c.GapMicroseconds < 0:
		return configErrorf("gap-us", "gap %g us is negative", c.GapMicroseconds)
	}
	return firstBelow(
		bound{"iters", c.Iters, 1},
		bound{"iters-large", c.ItersLarge, 1},
		bound{"warmup", c.Warmup, 0},
		bound{"rounds", c.Rounds, 1},
	)
}

// AllreduceRow is one message size: the mean latency of ours, of the cgo floor and of the C
// reference, averaged over ranks.
type AllreduceRow struct {
	Bytes      int     `json:"bytes"`
	Count      int     `json:"count"`
	Iters      int     `json:"iters"` // timed calls per side, all rounds together
	OurUs      float64 `json:"ours_avg_latency_us"`
	FloorUs    float64 `json:"cgo_floor_avg_latency_us"`
	RefUs      float64 `json:"c_avg_latency_us"`
	Ratio      float64 `json:"ratio"`          // ours / C
	FloorRatio float64 `json:"ratio_to_floor"` // ours / cgo floor: what the binding itself adds
	// elements whose MIN was wrong, all three sides, summed over ranks
	Wrong int64 `json:"wrong"`
}

// RunAllreduce measures, for every size, cphicache's writing_check all-reduce
// ((*mpi.Comm).AllreduceUint64 in place with mpi.Min, the call hicache makes), the cgo floor (the
// same MPI call entered from Go with no binding around it) and the C reference loop, on the same
// communicator, in the same job, in rotating order. comm must be the world communicator (the C
// side's and the floor's). Every rank must call it.
func RunAllreduce(comm *mpi.Comm, cfg AllreduceConfig) ([]AllreduceRow, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := configureRef(); err != nil {
		return nil, err
	}
	buf := make([]uint64, cfg.MaxCount)
	var rows []AllreduceRow
	for count := cfg.MinCount; count <= cfg.MaxCount; count *= cfg.CountFactor {
		row, err := allreduceSize(comm, cfg, buf[:count])
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// The three sides of a row, in the order the first round runs them.
const (
	sideOurs = iota
	sideFloor
	sideC
	sides
)

// allreduceSize times the three sides at one size, then validates them outside the timed loops.
func allreduceSize(comm *mpi.Comm, cfg AllreduceConfig, buf []uint64) (AllreduceRow, error) {
	row := AllreduceRow{Count: len(buf), Bytes: 8 * len(buf), Iters: cfg.Iters}
	if row.Bytes > largeMessageBytes {
		row.Iters = cfg.ItersLarge
	}
	ours := func(b []uint64) error { return comm.AllreduceUint64(b, b, mpi.Min) }
	gapSeconds := cfg.GapMicroseconds / 1e6
	var seconds [sides][]float64
	for round := range cfg.Rounds {
		// Rotating the order cancels a drift of the machine's load over the round.
		for k := range sides {
			side := (round + k) % sides
			var t float64
			var err error
			switch side {
			case sideOurs:
				t, err = goAllreduceLoop(comm, ours, buf, row.Iters, cfg.Warmup, gapSeconds)
			case sideFloor:
				t, err = goAllreduceLoop(
					comm,
					floorAllreduce,
					buf,
					row.Iters,
					cfg.Warmup,
					gapSeconds,
				)
			case sideC:
				t, err = refAllreduceLoop(buf, row.Iters, cfg.Warmup, gapSeconds)
			}
			if err != nil {
				return row, err
			}
			seconds[side] = append(seconds[side], t)
		}
	}
	// The median round of each side on each rank, so that a round slowed by another tenant of the
	// shared machine moves no number; then the mean over ranks, as OSU's "Avg Latency".
	for side, out := range []*float64{&row.OurUs, &row.FloorUs, &row.RefUs} {
		us, err := meanOverRanks(comm, 1e6*median(seconds[side]))
		if err != nil {
			return row, err
		}
		*out = us
	}
	row.Ratio = row.OurUs / row.RefUs
	row.FloorRatio = row.OurUs / row.FloorUs
	row.Iters *= cfg.Rounds
	var err error
	row.Wrong, err = validateAllreduce(comm, buf, ours)
	return row, err
}

// goAllreduceLoop is the Go twin of ref_allreduce_loop, for ours and for the cgo floor: the same
// warm-up, barrier and clock around call. call is a func value for both sides alike (an indirect
// call, about a nanosecond).
func goAllreduceLoop(
	comm *mpi.Comm,
	call func([]uint64) error,
	buf []uint64,
	iters, warmup int,
	gapSeconds float64,
) (float64, error) {
	for range warmup {
		if err := call(buf); err != nil {
			return 0, err
		}
	}
	if err := comm.Barrier(); err != nil {
		return 0, err
	}
	if gapSeconds > 0 {
		return goGapped(comm, func() error { return call(buf) }, iters, gapSeconds)
	}
	start := mpi.Wtime()
	for range iters {
		if err := call(buf); err != nil {
			return 0, err
		}
	}
	return (mpi.Wtime() - start) / float64(iters), nil
}

// goGapped spins gapSeconds and enters a barrier before every call of run, and times each call
// alone, as ref_allreduce_loop and ref_step_loop do (bench allreduce and bench step). The clock is
// time.Now, which reads the same clock as MPI_Wtime without a cgo call of its own inside the timed
// span.
func goGapped(comm *mpi.Comm, run func() error, iters int, gapSeconds float64) (float64, error) {
	gap := time.Duration(gapSeconds * float64(time.Second))
	var total time.Duration
	for range iters {
		for spinStart := time.Now(); time.Since(spinStart) < gap; {
		}
		if err := comm.Barrier(); err != nil {
			return 0, err
		}
		start := time.Now()
		if err := run(); err != nil {
			return 0, err
		}
		total += time.Since(start)
	}
	return total.Seconds() / float64(iters), nil
}

// meanOverRanks averages a per-rank latency over the communicator, as OSU's "Avg Latency" does. It
// travels as integer picoseconds because the binding reduces integers only.
func meanOverRanks(comm *mpi.Comm, us float64) (float64, error) {
	v := []int64{int64(us * 1e6)}
	if err := comm.AllreduceInt64(v, v, mpi.Sum); err != nil {
		return 0, err
	}
	return float64(v[0]) / 1e6 / float64(comm.Size()), nil
}

// validateAllreduce runs one untimed call of each side on known data and counts, over all ranks,
// the elements whose result is not the MIN every rank can compute for itself.
func validateAllreduce(comm *mpi.Comm, buf []uint64, ours func([]uint64) error) (int64, error) {
	var wrong int64
	for _, call := range []func([]uint64) error{ours, floorAllreduce, refAllreduceOnce} {
		fillMinInput(buf, comm.Rank())
		if err := call(buf); err != nil {
			return 0, err
		}
		wrong += countWrongMin(buf, comm.Size())
	}
	total := []int64{wrong}
	if err := comm.AllreduceInt64(total, total, mpi.Sum); err != nil {
		return 0, err
	}
	return total[0], nil
}

// minInput is rank's value at element i: a hash, so that the rank holding the MIN differs between
// elements and a reduction that returns any one rank's buffer (or skips a rank) is caught.
func minInput(rank, i int) uint64 {
	z := uint64(rank)<<32 ^ uint64(i) + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

func fillMinInput(buf []uint64, rank int) {
	for i := range buf {
		buf[i] = minInput(rank, i)
	}
}

// countWrongMin counts the elements of buf that differ from the MIN over ranks [0, ranks) of
// minInput.
func countWrongMin(buf []uint64, ranks int) int64 {
	var wrong int64
	for i, got := range buf {
		want := minInput(0, i)
		for r := 1; r < ranks; r++ {
			want = min(want, minInput(r, i))
		}
		if got != want {
			wrong++
		}
	}
	return wrong
}

var allreduceTable = table{
	{
		"size",
		"(B)",
		"%d",
		10,
	}, {"count", "(elements)", "%d", 11}, {"type", "", "%s", 6}, {"redop", "", "%s", 5},
	{
		"iters",
		"",
		"%d",
		7,
	}, {"ours", "(us)", "%.2f", 10}, {"cgo-floor", "(us)", "%.2f", 10}, {"C", "(us)", "%.2f", 10},
	{"ours/C", "", "%.3f", 7}, {"ours/floor", "", "%.3f", 10}, {"#wrong", "", "%d", 6},
}

// WriteAllreduceTable prints the rows under OSU/nccl-tests style headers: "Avg Latency(us)" of ours
// and of C.
func WriteAllreduceTable(w io.Writer, rows []AllreduceRow) {
	fmt.Fprintln(
		w,
		"# Avg Latency(us): mean over ranks of each rank's median round (a round: mean time per call); ours = (*mpi.Comm).AllreduceUint64 from Go,",
	)
	fmt.Fprintln(
		w,
		"# cgo-floor = the same MPI_Allreduce entered from Go through one bare cgo call (no binding), C = MPI_Allreduce loop in C",
	)
	allreduceTable.writeHeader(w)
	for _, r := range rows {
		allreduceTable.writeRow(
			w,
			r.Bytes,
			r.Count,
			"uint64",
			"min",
			r.Iters,
			r.OurUs,
			r.FloorUs,
			r.RefUs,
			r.Ratio,
			r.FloorRatio,
			r.Wrong,
		)
	}
}

// AllreduceWrong sums the #wrong column.
func AllreduceWrong(rows []AllreduceRow) int64 {
	var n int64
	for _, r := range rows {
		n += r.Wrong
	}
	return n
}
