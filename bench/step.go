package bench

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/runner"
	"github.com/cphicache/cphicache/mpi"
)

// StepConfig sizes the step benchmark.
type StepConfig struct {
	Iters  int // timed steps per side per round
	Warmup int // untimed steps before each timed loop
	Rounds int // rounds; each times every side, rotating which goes first
	// GapMicroseconds 0 times steps back to back. A positive gap spins that long and enters a
	// barrier before every step, and times each step alone: a step's agreement made between
	// stretches of other work.
	GapMicroseconds float64
}

// Validate returns a *errscope.ConfigError naming the first unusable field as its flag of
// `cphicache bench step`.
func (c StepConfig) Validate() error {
	if c.GapMicroseconds < 0 {
		return configErrorf("gap-us", "gap %g us is negative", c.GapMicroseconds)
	}
	return firstBelow(
		bound{"iters", c.Iters, 1},
		bound{"warmup", c.Warmup, 0},
		bound{"rounds", c.Rounds, 1},
	)
}

// stepWatchdogTimeout is `cphicache run`'s default --watchdog-timeout: the probe arms and disarms a
// watchdog on every step, as a run does.
const stepWatchdogTimeout = 120 * time.Second

// A step's agreement as each side makes it.
var (
	// The seed design, one all-reduce per question: writing_check MIN of [frontier, idle],
	// loading_check MIN of [frontier, done], the digest's MIN and its MAX.
	seedStepPlan = []stepCall{{words: 2}, {words: 2}, {words: 1}, {words: 1, max: true}}
	// The fused design: one MIN of the whole consensus vector.
	fusedStepPlan = []stepCall{{words: cache.VectorWords}}
)

// The sides of the step benchmark, in the order of the table.
const (
	stepOurs = iota
	stepFloor
	stepCFused
	stepCSeed
	stepSides
)

// stepRunOrder is the cycle the rounds rotate through: Go and C sides alternate, so that each Go
// side follows a C side, whichever goes first. A Go loop that follows a C loop (one long cgo call)
// ran up to 2 times slower for its first few milliseconds (per-round times at np 2); in the table's
// order ours always followed C-seed and the cgo floor always followed ours, so ours alone paid it.
var stepRunOrder = [stepSides]int{stepOurs, stepCFused, stepFloor, stepCSeed}

// stepSideInfo names a side and says what one of its steps is.
var stepSideInfo = [stepSides]struct {
	name, model string
	plan        []stepCall
}{
	stepOurs: {
		"ours",
		fmt.Sprintf(
			"runner.StepProbe.Step: (*consensus).agree(StepConsensus, vote), one MIN all-reduce of the %d-word vector through mpi/, watchdog armed, agreement checked",
			cache.VectorWords,
		),
		fusedStepPlan,
	},
	stepFloor: {
		"cgo-floor",
		"the same MPI_Allreduce MIN of the vector from Go through one bare cgo call (no binding), words written and checked in Go",
		fusedStepPlan,
	},
	stepCFused: {
		"C-fused",
		"a C loop of that one MPI_Allreduce MIN of the vector per step: the floor of the fused design",
		fusedStepPlan,
	},
	stepCSeed: {
		"C-seed",
		"a C loop of four separate MPI_Allreduce per step, one per question: writing_check MIN [frontier, idle], loading_check MIN [frontier, done], digest MIN (1 word), digest MAX (1 word)",
		seedStepPlan,
	},
}

// StepRow is one side: its mean latency per step, averaged over ranks, and ours over it.
type StepRow struct {
	Side      string  `json:"side"`
	Model     string  `json:"model"`
	Calls     int     `json:"calls_per_step"`
	Words     int     `json:"words_per_step"`
	Iters     int     `json:"iters"` // timed steps, all rounds together
	StepUs    float64 `json:"avg_latency_us_per_step"`
	OursRatio float64 `json:"ours_over_this"` // ours' latency / this side's
	// wrongly agreed words (ours: steps), summed over ranks
	Wrong int64 `json:"wrong"`
}

// RunStep measures, in the same job on the same communicator (comm must be the world: the C sides
// name MPI_COMM_WORLD themselves), hicache's step consensus through a runner.StepProbe beside the
// cgo floor of one fused call, a C loop of that call, and a C loop of the seed design's four calls.
// Every rank must call it.
func RunStep(comm *mpi.Comm, cfg StepConfig) ([]StepRow, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if comm.Size() < 2 {
		return nil, fmt.Errorf(
			"bench step needs at least 2 ranks: at 1 the step consensus is skipped (launch under mpirun -np 2 or more)",
		)
	}
	probe := runner.NewStepProbe(comm, stepWatchdogTimeout)
	defer probe.Close()
	gapSeconds := cfg.GapMicroseconds / 1e6
	floor := newFloorStep(comm)
	var seconds [stepSides][]float64
	var wrong [stepSides]int64
	// Round 0 is untimed: every side ran slower in the first rounds of a launch (ours up to 2
	// times, for 20 to 40 ms at np 2), beyond what a per-loop warm-up absorbs.
	for round := range cfg.Rounds + 1 {
		// Rotating the order cancels a drift of the machine's load over the round.
		for k := range stepSides {
			side := stepRunOrder[(round+k)%stepSides]
			first := uint64(
				round,
			) * uint64(
				cfg.Warmup+cfg.Iters,
			) // a fresh frontier each step, across rounds too
			var t float64
			var bad int64
			var err error
			switch side {
			case stepOurs:
				t, bad, err = goStepLoop(
					comm,
					probeStep(probe),
					first,
					cfg.Iters,
					cfg.Warmup,
					gapSeconds,
				)
			case stepFloor:
				t, bad, err = goStepLoop(comm, floor.step, first, cfg.Iters, cfg.Warmup, gapSeconds)
			default:
				t, bad, err = refStepLoop(
					stepSideInfo[side].plan,
					cfg.Iters,
					cfg.Warmup,
					gapSeconds,
				)
			}
			if err != nil {
				return nil, err
			}
			if round > 0 {
				seconds[side] = append(seconds[side], t)
			}
			wrong[side] += bad
		}
	}
	wrong[stepOurs] += probeCallsWrong(
		probe,
		comm.Size(),
		int64(cfg.Rounds+1)*int64(cfg.Iters+cfg.Warmup),
	)
	return stepRows(comm, cfg, seconds, wrong)
}

// stepRows turns each side's rounds into its row: the median round on each rank, so that a round
// slowed by another tenant of the shared machine moves no number, then the mean over ranks (OSU's
// "Avg Latency").
func stepRows(
	comm *mpi.Comm,
	cfg StepConfig,
	seconds [stepSides][]float64,
	wrong [stepSides]int64,
) ([]StepRow, error) {
	rows := make([]StepRow, stepSides)
	for side := range rows {
		us, err := meanOverRanks(comm, 1e6*median(seconds[side]))
		if err != nil {
			return nil, err
		}
		total := []int64{wrong[side]}
		if err := comm.AllreduceInt64(total, total, mpi.Sum); err != nil {
			return nil, err
		}
		info := stepSideInfo[side]
		rows[side] = StepRow{
			Side:   info.name,
			Model:  info.model,
			Calls:  len(info.plan),
			Words:  planWords(info.plan),
			Iters:  cfg.Iters * cfg.Rounds,
			StepUs: us,
			Wrong:  total[0],
		}
	}
	for i := range rows {
		rows[i].OursRatio = rows[stepOurs].StepUs / rows[i].StepUs
	}
	return rows, nil
}

func planWords(plan []stepCall) int {
	n := 0
	for _, c := range plan {
		n += c.words
	}
	return n
}

// goStep is one step of a Go side: the words wrongly agreed (or 1 for a wrong agreement of ours),
// or the error that ends the benchmark.
type goStep func(base uint64) (wrong int64, err error)

// probeStep is ours: one real step consensus, a wrong agreement counted, any other error returned.
func probeStep(p *runner.StepProbe) goStep {
	return func(base uint64) (int64, error) {
		err := p.Step(base)
		// A type assertion, not errors.As: Step returns the mismatch itself, and errors.As would
		// allocate its target on every step of the timed loop.
		if _, mismatch := err.(*runner.ProbeMismatchError); mismatch {
			return 1, nil
		}
		return 0, err
	}
}

// probeCallsWrong returns 1 unless the probe ran exactly the expected step consensus calls, every
// one on a communicator of size ranks: proof that ours went through the all-reduce, not the
// one-rank skip.
func probeCallsWrong(p *runner.StepProbe, ranks int, calls int64) int64 {
	s := p.Stats()
	if s.Count != calls || s.Skipped != 0 || s.CommSizeMin != ranks || s.CommSizeMax != ranks {
		return 1
	}
	return 0
}

// goStepLoop is the Go twin of ref_step_loop: the same warm-up, barrier and clock around the steps.
func goStepLoop(
	comm *mpi.Comm,
	step goStep,
	first uint64,
	iters, warmup int,
	gapSeconds float64,
) (float64, int64, error) {
	var wrong int64
	base := first
	run := func() error {
		bad, err := step(base)
		base++
		wrong += bad
		return err
	}
	for range warmup {
		if err := run(); err != nil {
			return 0, 0, err
		}
	}
	if err := comm.Barrier(); err != nil {
		return 0, 0, err
	}
	if gapSeconds > 0 {
		t, err := goGapped(comm, run, iters, gapSeconds)
		return t, wrong, err
	}
	start := mpi.Wtime()
	for range iters {
		if err := run(); err != nil {
			return 0, 0, err
		}
	}
	return (mpi.Wtime() - start) / float64(iters), wrong, nil
}

// floorStep is the cgo floor of a fused step: the words written as ref_step.c writes them, one bare
// cgo all-reduce MIN, the words checked.
type floorStep struct {
	buf    []uint64
	offset []uint64 // (rank + word) mod size: the ranks holding the MIN change from word to word
}

func newFloorStep(comm *mpi.Comm) *floorStep {
	f := &floorStep{
		buf:    make([]uint64, cache.VectorWords),
		offset: make([]uint64, cache.VectorWords),
	}
	for w := range f.offset {
		f.offset[w] = uint64((comm.Rank() + w) % comm.Size())
	}
	return f
}

func (f *floorStep) step(base uint64) (int64, error) {
	for w, off := range f.offset {
		f.buf[w] = base + off
	}
	if err := floorAllreduce(f.buf); err != nil {
		return 0, err
	}
	var wrong int64
	for _, v := range f.buf {
		if v != base {
			wrong++
		}
	}
	return wrong, nil
}

var stepTable = table{
	{
		"side",
		"",
		"%s",
		10,
	}, {"calls", "(/step)", "%d", 7}, {"words", "(/step)", "%d", 7}, {"iters", "", "%d", 8},
	{"step", "(us)", "%.2f", 10}, {"ours/side", "", "%.3f", 9}, {"#wrong", "", "%d", 6},
}

// WriteStepTable prints what each side models, then one row per side under nccl-tests style
// headers.
func WriteStepTable(w io.Writer, rows []StepRow) {
	fmt.Fprintln(
		w,
		"# Avg Latency(us) per step: mean over ranks of each rank's median round (a round: mean time per step). Sides:",
	)
	for _, r := range rows {
		fmt.Fprintf(w, "#   %-9s %s\n", r.Side, r.Model)
	}
	stepTable.writeHeader(w)
	for _, r := range rows {
		stepTable.writeRow(w, r.Side, r.Calls, r.Words, r.Iters, r.StepUs, r.OursRatio, r.Wrong)
	}
	if seed, ok := StepRatio(rows, "C-seed"); ok {
		fmt.Fprintf(
			w,
			"# ours/C-seed %.3f: our one step consensus against four separate calls made from C\n",
			seed,
		)
	}
}

// StepRatio is ours over the named side, and whether that side is in rows with a finite, positive
// ratio.
func StepRatio(rows []StepRow, side string) (float64, bool) {
	for _, r := range rows {
		if r.Side == side {
			ok := r.OursRatio > 0 && !math.IsInf(r.OursRatio, 0) && !math.IsNaN(r.OursRatio)
			return r.OursRatio, ok
		}
	}
	return 0, false
}

// StepWrong sums the #wrong column.
func StepWrong(rows []StepRow) int64 {
	var n int64
	for _, r := range rows {
		n += r.Wrong
	}
	return n
}
