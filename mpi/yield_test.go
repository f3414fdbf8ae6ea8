package mpi

import "testing"

func TestDecideYield(t *testing.T) {
	for _, tc := range []struct {
		setting        string
		libraryYields  bool
		ranks, cpus    int
		want, wantFail bool
	}{
		{"", false, 8, 2, true, false},      // MPICH oversubscribed: yield
		{"auto", false, 2, 2, false, false}, // a core per rank: poll
		// OpenMPI's mpi_yield_when_idle burns the core it yields: ours too
		{"", true, 8, 2, true, false},
		{"", true, 2, 2, false, false}, // OpenMPI, a core per rank: poll
		{"1", true, 1, 64, true, false},
		{"0", false, 16, 2, false, false},
		{"yes", false, 8, 2, false, true},
	} {
		got, err := decideYield(tc.setting, tc.libraryYields, tc.ranks, tc.cpus)
		if (err != nil) != tc.wantFail || got != tc.want {
			t.Errorf(
				"decideYield(%q, library yields %v, %d ranks, %d CPUs) = %v, %v; want %v, failure %v",
				tc.setting,
				tc.libraryYields,
				tc.ranks,
				tc.cpus,
				got,
				err,
				tc.want,
				tc.wantFail,
			)
		}
	}
}

// TestYieldingCollectivesGiveTheSameResults runs every collective once waiting the library's way
// and once by yielding (cph_wait), whatever Init chose, and checks that the yielding ones took that
// path.
func TestYieldingCollectivesGiveTheSameResults(t *testing.T) {
	defer setYieldWhenIdle(YieldWhenIdle())
	n, r := world.Size(), world.Rank()
	for _, yield := range []bool{false, true} {
		setYieldWhenIdle(yield)
		before := yieldingWaits()
		if err := world.Barrier(); err != nil {
			t.Fatal(err)
		}
		sum := []int64{int64(r)}
		if err := world.AllreduceInt64(sum, sum, Sum); err != nil {
			t.Fatal(err)
		}
		gathered := make([]int64, n)
		if err := world.AllgatherInt64([]int64{int64(r)}, gathered); err != nil {
			t.Fatal(err)
		}
		buf := []byte{byte(r)}
		if err := world.BcastBytes(buf, n-1); err != nil {
			t.Fatal(err)
		}
		if sum[0] != int64(n*(n-1)/2) || gathered[n-1] != int64(n-1) || buf[0] != byte(n-1) {
			t.Errorf(
				"yield %v: SUM %d, allgather %v, bcast %d; want %d, [0..%d], %d",
				yield,
				sum[0],
				gathered,
				buf[0],
				n*(n-1)/2,
				n-1,
				n-1,
			)
		}
		if waits, want := yieldingWaits()-before, map[bool]uint64{false: 0, true: 4}[yield]; waits != want {
			t.Errorf("yield %v: %d collectives waited by yielding, want %d", yield, waits, want)
		}
	}
}
