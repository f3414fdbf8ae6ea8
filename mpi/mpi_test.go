package mpi

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

// These tests are SPMD: the Makefile runs this test binary under mpirun at several rank counts, and
// plain `go test` runs it as a singleton (one rank). Every rank runs every test, so each test
// enters the same collectives in the same order on every rank.

var world *Comm

func TestMain(m *testing.M) {
	if err := Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	var err error
	if world, err = World(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	// Agree on failure so that every rank exits with the same code.
	failed := []int64{int64(code)}
	if err := world.AllreduceInt64(failed, failed, Max); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	} else if failed[0] != 0 && code == 0 {
		code = 1
	}
	if err := Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	}
	os.Exit(code)
}

func TestAllreduceInt64GivesMinMaxSum(t *testing.T) {
	n, r := int64(world.Size()), int64(world.Rank())
	// Element 1 is negative so that MIN and MAX cover signed values.
	send := []int64{r + 10, -r, 1 << 40}
	for _, tc := range []struct {
		op   Op
		want []int64
	}{
		{Min, []int64{10, -(n - 1), 1 << 40}},
		{Max, []int64{n - 1 + 10, 0, 1 << 40}},
		{Sum, []int64{n*(n-1)/2 + 10*n, -n * (n - 1) / 2, n << 40}},
	} {
		recv := make([]int64, len(send))
		if err := world.AllreduceInt64(send, recv, tc.op); err != nil {
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
	// 1<<63 is negative as int64: an unsigned MAX must still pick it.
	r := uint64(world.Rank())
	send := []uint64{r, 1 << 63}
	if world.Rank() != 0 {
		send[1] = 1
	}
	recv := make([]uint64, 2)
	if err := world.AllreduceUint64(send, recv, Max); err != nil {
		t.Fatal(err)
	}
	if recv[0] != uint64(world.Size()-1) || recv[1] != 1<<63 {
		t.Errorf("unsigned MAX = %v, want [%d %d]", recv, world.Size()-1, uint64(1)<<63)
	}
	if err := world.AllreduceUint64(send, recv, Min); err != nil {
		t.Fatal(err)
	}
	wantMin := uint64(1 << 63)
	if world.Size() > 1 {
		wantMin = 1
	}
	if recv[0] != 0 || recv[1] != wantMin {
		t.Errorf("unsigned MIN = %v, want [0 %d]", recv, wantMin)
	}
}

func TestAllreduceInPlace(t *testing.T) {
	buf := []int64{int64(world.Rank())}
	if err := world.AllreduceInt64(buf, buf, Max); err != nil {
		t.Fatal(err)
	}
	if buf[0] != int64(world.Size()-1) {
		t.Errorf("in-place MAX = %d, want %d", buf[0], world.Size()-1)
	}
}

func TestAllreduceRejectsLengthMismatch(t *testing.T) {
	if err := world.AllreduceInt64(make([]int64, 2), make([]int64, 3), Min); err == nil {
		t.Error("mismatched lengths were accepted")
	}
}

func TestAllgatherOrdersByRank(t *testing.T) {
	n := world.Size()
	recv := make([]int64, 2*n)
	if err := world.AllgatherInt64([]int64{int64(world.Rank()), int64(world.Rank() * 7)}, recv); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < n; r++ {
		if recv[2*r] != int64(r) || recv[2*r+1] != int64(7*r) {
			t.Fatalf("allgather slot %d = %v, want [%d %d]", r, recv[2*r:2*r+2], r, 7*r)
		}
	}
	u := make([]uint64, n)
	if err := world.AllgatherUint64([]uint64{^uint64(world.Rank())}, u); err != nil {
		t.Fatal(err)
	}
	for r := range u {
		if u[r] != ^uint64(r) {
			t.Fatalf("uint64 allgather slot %d = %x", r, u[r])
		}
	}
	b := make([]byte, 3*n)
	if err := world.AllgatherBytes([]byte{byte(world.Rank()), 'x', 'y'}, b); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < n; r++ {
		if !bytes.Equal(b[3*r:3*r+3], []byte{byte(r), 'x', 'y'}) {
			t.Fatalf("byte allgather slot %d = %v", r, b[3*r:3*r+3])
		}
	}
	if err := world.AllgatherInt64(make([]int64, 1), make([]int64, n+1)); err == nil {
		t.Error("a receive buffer of the wrong size was accepted")
	}
}

func TestBcastBytesFromLastRank(t *testing.T) {
	root := world.Size() - 1
	buf := make([]byte, 16)
	if world.Rank() == root {
		copy(buf, "slab-name-123456")
	}
	if err := world.BcastBytes(buf, root); err != nil {
		t.Fatal(err)
	}
	if string(buf) != "slab-name-123456" {
		t.Errorf("rank %d received %q", world.Rank(), buf)
	}
	if err := world.BcastBytes(buf, world.Size()); err == nil {
		t.Error("a root outside the communicator was accepted")
	}
}

// TestGathervBytesGivesRootEachRanksBytes: rank r sends r+1 bytes of value r (rank 1 sends none, so
// that an empty part is covered at 2 ranks and up); root, the last rank, gets each in rank order,
// the others nothing.
func TestGathervBytesGivesRootEachRanksBytes(t *testing.T) {
	root := world.Size() - 1
	send := bytes.Repeat([]byte{byte(world.Rank())}, world.Rank()+1)
	if world.Rank() == 1 {
		send = nil
	}
	parts, err := world.GathervBytes(send, root)
	if err != nil {
		t.Fatal(err)
	}
	if world.Rank() != root {
		if parts != nil {
			t.Errorf("rank %d, not the root, got %v", world.Rank(), parts)
		}
		return
	}
	if len(parts) != world.Size() {
		t.Fatalf("root got %d parts from %d ranks", len(parts), world.Size())
	}
	for r, p := range parts {
		want := bytes.Repeat([]byte{byte(r)}, r+1)
		if r == 1 {
			want = []byte{}
		}
		if !bytes.Equal(p, want) {
			t.Errorf("part of rank %d = %v, want %v", r, p, want)
		}
	}
	if _, err := world.GathervBytes(nil, world.Size()); err == nil {
		t.Error("a root outside the communicator was accepted")
	}
}

func TestSplitGroupsConsecutiveRanks(t *testing.T) {
	// Groups of two consecutive ranks, as CP groups of cp=2 would be.
	group := world.Rank() / 2
	c, err := world.Split(group, world.Rank(), "pairs")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Free()
	wantSize := 2
	if world.Size()%2 == 1 && group == world.Size()/2 {
		wantSize = 1
	}
	if c.Size() != wantSize || c.Rank() != world.Rank()%2 {
		t.Fatalf(
			"rank %d: pair communicator rank %d of %d, want %d of %d",
			world.Rank(),
			c.Rank(),
			c.Size(),
			world.Rank()%2,
			wantSize,
		)
	}
	members := make([]int64, c.Size())
	if err := c.AllgatherInt64([]int64{int64(world.Rank())}, members); err != nil {
		t.Fatal(err)
	}
	for i, m := range members {
		if m != int64(2*group+i) {
			t.Errorf("rank %d: member %d is world rank %d, want %d", world.Rank(), i, m, 2*group+i)
		}
	}
	// A reduction on the split communicator must not see the other groups.
	sum := []int64{1}
	if err := c.AllreduceInt64(sum, sum, Sum); err != nil {
		t.Fatal(err)
	}
	if sum[0] != int64(wantSize) {
		t.Errorf("SUM over a pair = %d, want %d", sum[0], wantSize)
	}
}

func TestSplitSharedHoldsThisNode(t *testing.T) {
	node, err := world.SplitShared(world.Rank(), "node")
	if err != nil {
		t.Fatal(err)
	}
	defer node.Free()
	if node.Size() < 1 || node.Size() > world.Size() || node.Rank() >= node.Size() {
		t.Fatalf(
			"node communicator rank %d of %d in a world of %d",
			node.Rank(),
			node.Size(),
			world.Size(),
		)
	}
	host, err := ProcessorName()
	if err != nil || host == "" {
		t.Fatalf("ProcessorName = %q, %v", host, err)
	}
}

func TestMPIErrorCarriesLibraryMessage(t *testing.T) {
	// Freeing a communicator twice is an error that both OpenMPI and MPICH detect and return (MPICH
	// does not check a negative split color, which this test used before), because every
	// communicator is set to MPI_ERRORS_RETURN.
	c, err := world.Split(0, world.Rank(), "twice")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Free(); err != nil {
		t.Fatal(err)
	}
	err = c.Free()
	var mpiErr *Error
	if !errors.As(err, &mpiErr) {
		t.Fatalf("a second Free = %v, want an *mpi.Error", err)
	}
	if mpiErr.Code == 0 || mpiErr.Message == "" || mpiErr.Call != "MPI_Comm_free" {
		t.Errorf("error lacks MPI's code or message: %+v", mpiErr)
	}
}

func TestVersionAndWtime(t *testing.T) {
	major, _, err := Version()
	if err != nil || major < 3 {
		t.Errorf("MPI version %d, %v: want 3 or later", major, err)
	}
	if lib, err := LibraryVersion(); err != nil || lib == "" {
		t.Errorf("LibraryVersion = %q, %v", lib, err)
	}
	if a, b := Wtime(), Wtime(); b < a {
		t.Errorf("Wtime went backwards: %v then %v", a, b)
	}
}

// TestAllreduceOfStackBuffersAcrossStackGrowth calls the all-reduce with a fresh local buffer at
// many stack depths, so that at some depth the call itself grows (and copies) the goroutine's
// stack. The binding passes addresses to C; a buffer left on the stack would then be read and
// written at its old, stale address. It bites from 2 ranks on (at one rank an in-place all-reduce
// touches nothing): it failed at depth 16 of 400 at np 2 before the binding routed the addresses
// through a go:uintptrescapes function.
func TestAllreduceOfStackBuffersAcrossStackGrowth(t *testing.T) {
	n := int64(world.Size())
	for depth := 0; depth < 400; depth++ {
		got, err := allreduceAtDepth(depth, int64(world.Rank())+int64(depth))
		if err != nil {
			t.Fatal(err)
		}
		if want := n*int64(depth) + n*(n-1)/2; got != want {
			t.Fatalf("depth %d: SUM = %d, want %d", depth, got, want)
		}
	}
}

//go:noinline
func allreduceAtDepth(depth int, v int64) (int64, error) {
	if depth > 0 {
		var pad [64]byte // spends stack on every level, so the depth decides where the call lands
		r, err := allreduceAtDepth(depth-1, v)
		return r + int64(pad[depth%64]), err
	}
	buf := []int64{v}
	err := world.AllreduceInt64(buf, buf, Sum)
	return buf[0], err
}

func TestLibraryNameSaysWhichAndWhatVersion(t *testing.T) {
	for in, want := range map[string]string{
		"MPICH Version:\t4.0.2\nMPICH Release date:\tThu Apr  7 12:34:45 CDT 2022\nMPICH Device:\tch4:ucx\n": "MPICH 4.0.2",
		"MVAPICH2 Version      :\t2.3.7\nMVAPICH2 Release date :\tWed March 02 22:00:00 EST 2022\n":          "MVAPICH2 2.3.7",
		"Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022\x00":         "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4, repo rev: v4.1.4, May 26, 2022",
		"Intel(R) MPI Library 2021.9 for Linux* OS\n\n":                                                      "Intel(R) MPI Library 2021.9 for Linux* OS",
		"MPI VERSION    : CRAY MPICH version 8.1.26.12 (ANL base 3.4a2)\nMPI BUILD INFO : Sun Feb 26 2023\n": "CRAY MPICH version 8.1.26.12 (ANL base 3.4a2)",
	} {
		if got := libraryName(in); got != want {
			t.Errorf("libraryName(%q) = %q, want %q", in, got, want)
		}
	}
	// The library this test runs on: a name, then a version with a digit in it, on one line.
	lib, err := LibraryVersion()
	if err != nil || strings.ContainsAny(lib, "\n\t") || !strings.ContainsAny(lib, "0123456789") {
		t.Errorf(
			"LibraryVersion = %q, %v: want one line naming the library and its version",
			lib,
			err,
		)
	}
}
