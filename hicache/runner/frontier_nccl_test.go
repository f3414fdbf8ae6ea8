package runner

import (
	"fmt"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/transport"
)

// TestNCCLFrontierReducesMinInPlace checks the build's NCCL reducer alone (host buffers over
// ncclshim in the CPU build, device buffers over NVIDIA's NCCL in the cuda build): the MIN of every
// CP rank's value, written back into the caller's slice, and a call longer than the buffer refused.
func TestNCCLFrontierReducesMinInPlace(t *testing.T) {
	ncclForTest(t)
	job := testJob(t)
	f, err := transport.NewReducer(job.Topo, "nccl", cache.VectorWords, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := transport.Close(f); err != nil {
			t.Error(err)
		}
	}()
	cpRank := uint64(job.Topo.CPRank)
	values := []uint64{100 + cpRank, 1<<63 + cpRank} // the second is past int64: unsigned order
	if err := f.AllreduceMinUint64(values); err != nil {
		t.Fatal(err)
	}
	if values[0] != 100 || values[1] != 1<<63 {
		t.Errorf("MIN over %d CP ranks = %v, want [100 %d]", job.Topo.CPSize, values, uint64(1<<63))
	}
	if err := f.AllreduceMinUint64(make([]uint64, cache.VectorWords+1)); err == nil {
		t.Error("a call longer than the buffer was accepted")
	}
}

// preMulSumReducer is what both builds' NCCL reducers offer the tests beside the MIN: NCCL's
// pre-multiplied sum through the same buffer (device memory in the cuda build, pinned host memory
// over ncclshim in the CPU build).
type preMulSumReducer interface {
	transport.MinAllReducer
	AllreducePreMulSumUint64(values []uint64, factor uint64) error
}

// provenReducer carries each consensus call as production does, the MIN through the NCCL reducer,
// and then proves that call's reduction: the agreed vector goes through the same buffer and stream
// once more as NCCL's pre-multiplied sum (x3), and every word must come back as 3 x cp x its MIN,
// wrapping. On one rank a MIN leaves its values as they were, so a reducer that did nothing at all
// would pass the run; it would not pass this.
type provenReducer struct {
	preMulSumReducer
	cpSize       uint64
	calls, words int64
}

func (p *provenReducer) AllreduceMinUint64(values []uint64) error {
	if err := p.preMulSumReducer.AllreduceMinUint64(values); err != nil {
		return err
	}
	sum := append([]uint64(nil), values...)
	if err := p.preMulSumReducer.AllreducePreMulSumUint64(sum, 3); err != nil {
		return err
	}
	for i, v := range values {
		if want := 3 * p.cpSize * v; sum[i] != want {
			return fmt.Errorf(
				"consensus call %d: NCCL's x3 sum of word %d (MIN %#x over %d ranks) = %#x, want %#x",
				p.calls+1,
				i,
				v,
				p.cpSize,
				sum[i],
				want,
			)
		}
	}
	p.calls++
	p.words += int64(len(values))
	return nil
}

func (p *provenReducer) Close() error { return transport.Close(p.preMulSumReducer) }

// ncclRunOptions is smallOptions over the NCCL reducer, validated, for a whole run whose load-backs
// are verified. Its backups commit in their step (SyncCopies), so that there are load-backs to
// verify whatever the node's load: with async copies an np 1 run on a loaded node loaded nothing
// back (1 in 40 beside 6 busy loops). cli's TestRunWithNCCLCollectiveOverTheShim runs async copies
// over NCCL.
func ncclRunOptions(t *testing.T) *config.Options {
	t.Helper()
	opts := smallOptions()
	opts.Collective, opts.SyncCopies = "nccl", true
	if err := CheckOptions(opts); err != nil {
		t.Fatal(err)
	}
	return opts
}

// TestRunOverNCCLProvesEveryReduction is a whole run over the NCCL reducer in which every step,
// flush and final consensus call is proven to have been reduced by NCCL: at one rank (the GPU
// check's) the consensus, which skips a one-rank group's calls, sends them through the reducer
// anyway (Testing.ProveReducer), and each is checked with the pre-multiplied sum (provenReducer).
// The run must come out clean, as it does over MPI.
func TestRunOverNCCLProvesEveryReduction(t *testing.T) {
	ncclForTest(t)
	job := testJob(t)
	opts := ncclRunOptions(t)
	var proven *provenReducer
	tst := checked()
	tst.ProveReducer = func(r transport.MinAllReducer) transport.MinAllReducer {
		pr, ok := r.(preMulSumReducer)
		if !ok {
			t.Errorf("the NCCL reducer %T has no pre-multiplied sum", r)
			return r
		}
		proven = &provenReducer{preMulSumReducer: pr, cpSize: uint64(job.Topo.CPSize)}
		return proven
	}
	r, err := runTesting(job, opts, tst)
	if err != nil {
		t.Fatal(err)
	}
	if proven == nil {
		t.Fatal("the run made no NCCL reducer")
	}
	if r.Transport != "nccl" || r.Placement.Divergences != 0 || r.Verify.Mismatches != 0 ||
		r.Verify.PagesChecked == 0 {
		t.Errorf(
			"collective %q: %d divergences, %d mismatches of %d pages checked",
			r.Transport,
			r.Placement.Divergences,
			r.Verify.Mismatches,
			r.Verify.PagesChecked,
		)
	}
	if r.Backup.Reserved == 0 || r.Backup.Committed != r.Backup.Reserved {
		t.Errorf("%d backups reserved, %d committed", r.Backup.Reserved, r.Backup.Committed)
	}
	var consensusCalls int64
	for _, kind := range []string{"step", "flush", "final"} {
		s := r.Groups[job.Topo.CPGroup].Collectives[kind]
		consensusCalls += s.Count + s.Skipped
	}
	if proven.calls == 0 || proven.calls != consensusCalls {
		t.Fatalf(
			"%d reductions proven, want one per step, flush and final consensus call: %d",
			proven.calls,
			consensusCalls,
		)
	}
	checkReportScoping(t, r)
	checkNoLeakedSegments(t)
	t.Logf(
		"proves: a whole run at CP %d over the NCCL reducer (%s): its %d step, flush and final consensus calls (%d words) each reduced MIN, then proven by NCCL's x3 sum through the same buffer; 0 divergences, 0 mismatches of %d load-back pages",
		job.Topo.CPSize,
		reducerBuffer,
		proven.calls,
		proven.words,
		r.Verify.PagesChecked,
	)
}
