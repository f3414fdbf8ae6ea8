package nccl

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/mpi"
)

func TestNewCommOverMPIUsesTheMPIRanks(t *testing.T) {
	comm := worldComm(t)
	if comm.Rank() != world.Rank() || comm.Size() != world.Size() {
		t.Errorf(
			"NCCL rank %d of %d, MPI rank %d of %d",
			comm.Rank(),
			comm.Size(),
			world.Rank(),
			world.Size(),
		)
	}
}

func TestAllreduceInt64GivesMinMaxSum(t *testing.T) {
	comm := worldComm(t)
	n, r := int64(world.Size()), int64(world.Rank())
	// Element 1 is negative so that MIN and MAX cover signed order; element 2 is beyond 32 bits.
	send := []int64{r + 10, -r, 1<<40 + r}
	for _, tc := range []struct {
		op   Op
		want []int64
	}{
		{Min, []int64{10, -(n - 1), 1 << 40}},
		{Max, []int64{n - 1 + 10, 0, 1<<40 + n - 1}},
		{Sum, []int64{n*(n-1)/2 + 10*n, -n * (n - 1) / 2, n<<40 + n*(n-1)/2}},
	} {
		recv := make([]int64, len(send))
		if err := comm.AllreduceInt64(hostPtr(t, send), hostPtr(t, recv), len(send), tc.op, 0); err != nil {
			t.Fatal(err)
		}
		for i := range recv {
			if recv[i] != tc.want[i] {
				t.Errorf(
					"%v on %d ranks: element %d = %d, want %d",
					tc.op,
					n,
					i,
					recv[i],
					tc.want[i],
				)
			}
		}
	}
}

func TestAllreduceUint64UsesUnsignedOrder(t *testing.T) {
	comm := worldComm(t)
	// 1<<63 is negative as int64: unsigned MAX must pick it and unsigned MIN must not.
	send := []uint64{uint64(world.Rank()), 1 << 63, math.MaxUint64}
	if world.Rank() != 0 {
		send[1] = 1
	}
	wantMax := []uint64{uint64(world.Size() - 1), 1 << 63, math.MaxUint64}
	wantMin := []uint64{0, 1, math.MaxUint64}
	if world.Size() == 1 {
		wantMin[1] = 1 << 63
	}
	for _, tc := range []struct {
		op   Op
		want []uint64
	}{{Max, wantMax}, {Min, wantMin}} {
		recv := make([]uint64, len(send))
		if err := comm.AllreduceUint64(hostPtr(t, send), hostPtr(t, recv), len(send), tc.op, 0); err != nil {
			t.Fatal(err)
		}
		for i := range recv {
			if recv[i] != tc.want[i] {
				t.Errorf("unsigned %v: element %d = %d, want %d", tc.op, i, recv[i], tc.want[i])
			}
		}
	}
}

func TestAllreduceInPlaceWhenSendIsRecv(t *testing.T) {
	comm := worldComm(t)
	// writing_check reduces the frontier in place.
	frontier := []int64{int64(100 + world.Rank())}
	p := hostPtr(t, frontier)
	if err := comm.AllreduceInt64(p, p, 1, Min, 0); err != nil {
		t.Fatal(err)
	}
	if frontier[0] != 100 {
		t.Errorf("in-place MIN = %d, want 100", frontier[0])
	}
}

// TestTwoGroupsStayIndependent splits the world in two halves, as CP groups are, each with its own
// unique id: every reduction must stay inside its group.
func TestTwoGroupsStayIndependent(t *testing.T) {
	groupSize := world.Size()
	if world.Size()%2 == 0 {
		groupSize = world.Size() / 2
	}
	group := world.Rank() / groupSize
	mpiGroup, err := world.Split(group, world.Rank(), "cp")
	if err != nil {
		t.Fatal(err)
	}
	defer mpiGroup.Free()
	comm, err := NewCommOverMPI(shim, mpiGroup, testInitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := comm.Destroy(); err != nil {
			t.Error(err)
		}
	}()
	if comm.Size() != groupSize {
		t.Fatalf("group %d has %d NCCL ranks, want %d", group, comm.Size(), groupSize)
	}
	send := []int64{int64(world.Rank()), int64(world.Rank())}
	minRecv, maxRecv := make([]int64, 2), make([]int64, 2)
	if err := comm.AllreduceInt64(hostPtr(t, send), hostPtr(t, minRecv), 2, Min, 0); err != nil {
		t.Fatal(err)
	}
	if err := comm.AllreduceInt64(hostPtr(t, send), hostPtr(t, maxRecv), 2, Max, 0); err != nil {
		t.Fatal(err)
	}
	first, last := int64(group*groupSize), int64((group+1)*groupSize-1)
	if minRecv[0] != first || maxRecv[0] != last {
		t.Errorf(
			"group %d of world ranks [%d, %d]: MIN %d MAX %d",
			group,
			first,
			last,
			minRecv[0],
			maxRecv[0],
		)
	}
}

func TestAllreduceNullBufferReturnsNCCLError(t *testing.T) {
	comm := worldComm(t)
	recv := make([]int64, 1)
	// The library refuses a NULL buffer locally, so no rank waits for the others.
	err := comm.AllreduceInt64(0, hostPtr(t, recv), 1, Min, 0)
	e := asError(t, err)
	if e.Call != "ncclAllReduce" || e.Code != InvalidArgument ||
		e.Detail != "ncclAllReduce: send buffer is NULL" {
		t.Errorf("error %+v", e)
	}
}

func TestAllreduceRejectsNegativeCountAndUnknownOperator(t *testing.T) {
	comm := worldComm(t)
	buf := make([]int64, 1)
	p := hostPtr(t, buf)
	if err := comm.AllreduceInt64(p, p, -1, Min, 0); err == nil {
		t.Error("count -1 accepted")
	}
	if err := comm.AllreduceUint64(p, p, 1, Op(1), 0); err == nil {
		t.Error("operator PROD accepted")
	}
}

func TestAllreduceOfNothingIsANoOp(t *testing.T) {
	comm := worldComm(t)
	if err := comm.AllreduceInt64(0, 0, 0, Min, 0); err != nil {
		t.Error(err)
	}
}

func TestDestroyedCommRefusesWorkAndDestroysOnce(t *testing.T) {
	comm, err := NewCommOverMPI(shim, world, testInitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if err := comm.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := comm.Destroy(); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	if err := comm.Abort(); err != nil {
		t.Errorf("Abort after Destroy: %v", err)
	}
	buf := make([]int64, 1)
	p := hostPtr(t, buf)
	if err := comm.AllreduceInt64(p, p, 1, Min, 0); !errors.Is(err, ErrDestroyed) {
		t.Errorf("all-reduce after Destroy: %v, want ErrDestroyed", err)
	}
}

func TestAbortReleasesTheComm(t *testing.T) {
	comm, err := NewCommOverMPI(shim, world, testInitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if err := comm.Abort(); err != nil {
		t.Fatal(err)
	}
	buf := make([]int64, 1)
	p := hostPtr(t, buf)
	if err := comm.AllreduceInt64(p, p, 1, Min, 0); !errors.Is(err, ErrDestroyed) {
		t.Errorf("all-reduce after Abort: %v, want ErrDestroyed", err)
	}
}

func TestLegacyLibraryReducesToo(t *testing.T) {
	lib, err := Load(legacyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	comm, err := NewCommOverMPI(lib, world, testInitTimeout)
	if err != nil {
		t.Fatal(err)
	}
	defer comm.Destroy()
	v := []uint64{uint64(world.Rank()) + 7}
	p := hostPtr(t, v)
	if err := comm.AllreduceUint64(p, p, 1, Min, 0); err != nil {
		t.Fatal(err)
	}
	if v[0] != 7 {
		t.Errorf("legacy MIN = %d, want 7", v[0])
	}
}

// TestInitRankWithinIsNonBlockingAndWaited: with a library that has ncclCommInitRankConfig, the
// communicator is non-blocking and ready when NewCommOverMPI returns (the shim refuses an
// all-reduce on one still in progress, and answers each all-reduce with ncclInProgress, which the
// binding must wait out); the legacy one falls back to the blocking init.
func TestInitRankWithinIsNonBlockingAndWaited(t *testing.T) {
	t.Setenv("NCCLSHIM_INIT_POLLS", "20")
	if !shim.HasNonBlockingInit() {
		t.Fatalf("shim (NCCL %s) has no non-blocking init", VersionString(shim.Version()))
	}
	comm := worldComm(t)
	if !comm.nonBlocking {
		t.Fatal("communicator of a 2.14+ library is blocking")
	}
	for round := range 3 {
		v := []uint64{uint64(world.Rank()) + 5}
		p := hostPtr(t, v)
		if err := comm.AllreduceUint64(p, p, 1, Min, 0); err != nil || v[0] != 5 {
			t.Fatalf(
				"round %d: MIN on a non-blocking communicator = %d, %v; want 5",
				round,
				v[0],
				err,
			)
		}
	}
	legacy, err := Load(legacyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	if legacy.HasNonBlockingInit() {
		t.Error("legacy NCCL 2.7.8 claims a non-blocking init")
	}
}

// TestInitRankWithinAbortsOnTimeout: an init that never completes (a peer that never arrives) ends
// after the bound with a Timeout error on every rank, its communicator aborted, instead of waiting
// for good.
func TestInitRankWithinAbortsOnTimeout(t *testing.T) {
	t.Setenv("NCCLSHIM_INIT_HANG", "1")
	const bound = 300 * time.Millisecond
	start := time.Now()
	comm, err := NewCommOverMPI(shim, world, bound)
	waited := time.Since(start)
	if err == nil {
		comm.Destroy()
		t.Fatal("an init that never completes returned a communicator")
	}
	if !errors.Is(err, Timeout) || !strings.Contains(err.Error(), "ncclCommInitRankConfig") {
		t.Errorf("error %v: want ncclTimeout naming ncclCommInitRankConfig", err)
	}
	if waited < bound || waited > bound+5*time.Second {
		t.Errorf("gave up after %v, want just over %v", waited, bound)
	}
}

// BenchmarkAllreduceMinOneValue measures one writing_check-sized MIN through the binding (cgo, a
// function pointer, the shim's MPI_Allreduce) beside the mpi package's own call. At one rank only:
// b.N differs from rank to rank, which would leave collectives unmatched.
func BenchmarkAllreduceMinOneValue(b *testing.B) {
	if world.Size() != 1 {
		b.Skip("benchmarks run at one rank")
	}
	comm, err := NewCommOverMPI(shim, world, testInitTimeout)
	if err != nil {
		b.Fatal(err)
	}
	defer comm.Destroy()
	v := []int64{1}
	p := hostPtr(b, v)
	b.Run("nccl-shim", func(b *testing.B) {
		for b.Loop() {
			if err := comm.AllreduceInt64(p, p, 1, Min, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("mpi", func(b *testing.B) {
		for b.Loop() {
			if err := world.AllreduceInt64(v, v, mpi.Min); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAllreducePreMulSumMultipliesThenSums: every rank's values times the scalar, summed, wrapping
// modulo 2^64, with distinct send and receive buffers (the send buffer left as it was); the legacy
// library (2.7.8) has no such operator and says so, naming the library.
func TestAllreducePreMulSumMultipliesThenSums(t *testing.T) {
	comm := worldComm(t)
	if !shim.HasPreMulSum() {
		t.Fatal("the shim (NCCL 2.21.5) has no ncclRedOpCreatePreMulSum")
	}
	n, r := uint64(world.Size()), uint64(world.Rank())
	send := []uint64{r + 1, 1 << 62}
	recv := make([]uint64, len(send))
	for round := range 2 { // twice: the operator is destroyed after each call, and a new one made
		if err := comm.AllreducePreMulSumUint64(hostPtr(t, send), hostPtr(t, recv), len(send), 3, 0); err != nil {
			t.Fatal(err)
		}
		want := []uint64{3 * n * (n + 1) / 2, 3 * n << 62}
		if recv[0] != want[0] || recv[1] != want[1] || send[0] != r+1 {
			t.Errorf(
				"round %d: PreMulSum x3 on %d ranks = %v (send now %v), want %v",
				round,
				n,
				recv,
				send,
				want,
			)
		}
	}
	legacy, err := Load(legacyPath)
	if err != nil {
		t.Fatal(err)
	}
	defer legacy.Close()
	if legacy.HasPreMulSum() {
		t.Error("legacy NCCL 2.7.8 claims ncclRedOpCreatePreMulSum")
	}
}
