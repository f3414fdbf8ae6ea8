//go:build cuda

package transport

// The GPU check's one-rank run of the production start-up (kernels/gpu-check.sh runs this binary,
// built with the cuda and mpiself tags, on a GPU machine that may have no MPI): the topology, a CP
// group's shared L2 slab in /dev/shm, Start with its watchdog and agreements, the CUDA engine
// copying through that slab, the GPU layout (DeviceCount, GPUBusID), and the NCCL reducer with its
// one-rank communicator made over the CP communicator (NewCommOverMPI) and its device buffer
// (kernels.DeviceWords). Each test's log line says what it proves.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/kernels"
	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/mpi/mpitest"
	"github.com/cphicache/cphicache/pool"
)

var testWorld *mpi.Comm

func TestMain(m *testing.M) { mpitest.Main(m, &testWorld) }

// deviceTestWatchdog is long: the watchdog ends the process, and gpu-check.sh's bound on the step
// comes first.
const deviceTestWatchdog = 60 * time.Second

// busIDPattern is a PCI bus id as cuDeviceGetPCIBusId writes it ("00000000:1B:00.0" or
// "0000:1b:00.0").
var busIDPattern = regexp.MustCompile(
	`^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]$`,
)

func oneRankTopology(t *testing.T) *spmd.Topology {
	t.Helper()
	topo, err := spmd.NewTopology(testWorld, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(topo.Close)
	if topo.CPSize != 1 {
		t.Fatalf("the device tests run at one rank; this job has CP groups of %d", topo.CPSize)
	}
	return topo
}

// deviceTestGeometry is a small pool of three slabs, so that spans land in several registered
// slabs.
func deviceTestGeometry() pool.Geometry {
	g := pool.Geometry{
		CPSize:           1,
		Layers:           2,
		PayloadsPerLayer: 2,
		PageTokens:       16,
		TokenBytes:       1024,
		Slots:            48,
		Layout:           pool.LayerFirst,
	}
	g.SlabBytesMax = 16 * g.SlotBytes()
	return g
}

// startOnSharedSlab opens the CP group's slab in /dev/shm and runs Start over it, as runner.Run
// does.
func startOnSharedSlab(
	t *testing.T,
	collective string,
) (*spmd.Topology, *shm.SharedSlab, kernels.Engine, MinAllReducer) {
	t.Helper()
	topo := oneRankTopology(t)
	cleanup := &spmd.Cleanup{}
	t.Cleanup(cleanup.Run)
	jobID := fmt.Sprintf("gpucheck%d", os.Getpid())
	slab, err := shm.OpenSharedSlab(
		topo.CP,
		deviceTestGeometry(),
		shm.Segment{JobID: jobID},
		cleanup,
	)
	if err != nil {
		t.Fatal(err)
	}
	watchdog := spmd.NewWatchdog(deviceTestWatchdog, topo.WorldRank, cleanup.Run)
	t.Cleanup(watchdog.Stop)
	cfg := Config{
		Collective:      collective,
		Words:           9,
		DeviceBytes:     8 << 20,
		Slabs:           slab.Slabs,
		WatchdogTimeout: deviceTestWatchdog,
	}
	eng, reducer, err := Start(topo, cfg, watchdog)
	if err != nil {
		slab.Close()
		t.Fatal(err)
	}
	// The engine is closed before the slab is unmapped, as hicache does.
	t.Cleanup(func() {
		if err := Close(reducer); err != nil {
			t.Error(err)
		}
		if err := eng.Close(); err != nil {
			t.Error(err)
		}
		if err := slab.Close(); err != nil {
			t.Error(err)
		}
		if leaked, _ := shm.JobSegments(jobID); len(leaked) != 0 {
			t.Errorf("shared memory left behind: %v", leaked)
		}
	})
	return topo, slab, eng, reducer
}

// TestGPULayoutSeesTheGPU: DeviceCount, GPUBusID and DescribeGPU (cphicache topo's GPU column) on
// this machine.
func TestGPULayoutSeesTheGPU(t *testing.T) {
	topo := oneRankTopology(t)
	count, err := kernels.DeviceCount()
	if err != nil || count < 1 {
		t.Fatalf("DeviceCount = %d, %v: want at least one GPU", count, err)
	}
	busID, err := kernels.GPUBusID(0)
	if err != nil || !busIDPattern.MatchString(busID) {
		t.Fatalf("GPUBusID(0) = %q, %v: want a PCI bus id", busID, err)
	}
	if got, want := DescribeGPU(topo), "0 "+busID; got != want {
		t.Errorf("DescribeGPU = %q, want %q", got, want)
	}
	t.Logf(
		"proves: DeviceCount %d, GPU 0 at PCI bus id %s, the layout picks it for the one rank",
		count,
		busID,
	)
}

// TestStartCopiesThroughTheSharedSlab: Start makes the CUDA engine over the /dev/shm slab
// (registered, mapped); pages gathered from the device land in the slab's shared memory, byte for
// byte, in every slab; scattered back into a cleared device buffer, they are the same bytes again.
func TestStartCopiesThroughTheSharedSlab(t *testing.T) {
	_, slab, eng, reducer := startOnSharedSlab(t, "mpi")
	if _, ok := eng.(*kernels.CUDAEngine); !ok || eng.Name() != kernels.KindCUDA {
		t.Fatalf("Start made a %T engine (%q), want the CUDA engine", eng, eng.Name())
	}
	if reducer != nil {
		t.Fatalf("--collective mpi made a %T reducer, want none", reducer)
	}
	const part = 64 << 10
	var spans []kernels.Span
	for s, b := range slab.Slabs {
		// One span at each slab's start and one at its end, each from its own device offset.
		for _, off := range []int64{0, int64(len(b)) - part} {
			spans = append(
				spans,
				kernels.Span{
					DeviceOffsetBytes: int64(len(spans)) * part,
					Slab:              int32(s),
					SlabOffsetBytes:   off,
					Bytes:             part,
				},
			)
		}
	}
	content := make([]byte, int64(len(spans))*part)
	rng := rand.New(rand.NewPCG(23, 23))
	for i := range content {
		content[i] = byte(rng.Uint32())
	}
	if err := eng.WriteDevice(0, content); err != nil {
		t.Fatal(err)
	}
	if err := eng.Gather(spans); err != nil {
		t.Fatal(err)
	}
	for i, s := range spans {
		if !bytes.Equal(
			slab.Slabs[s.Slab][s.SlabOffsetBytes:s.SlabOffsetBytes+s.Bytes],
			content[s.DeviceOffsetBytes:s.DeviceOffsetBytes+s.Bytes],
		) {
			t.Fatalf(
				"Gather: span %d (slab %d at %d) does not hold its device bytes in shared memory",
				i,
				s.Slab,
				s.SlabOffsetBytes,
			)
		}
	}
	if err := eng.WriteDevice(0, make([]byte, len(content))); err != nil {
		t.Fatal(err)
	}
	if err := eng.Scatter(spans); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(content))
	if err := eng.ReadDevice(0, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, content) {
		t.Fatal("Scatter: the device buffer does not hold the slab's bytes again")
	}
	t.Logf(
		"proves: transport.Start made the CUDA engine over a %d-slab /dev/shm segment (%s); %d spans gathered into shared memory and scattered back, byte for byte",
		len(slab.Slabs),
		slab.Name,
		len(spans),
	)
}

// TestStartMakesTheNCCLReducerOnTheDevice: Start with --collective nccl loads NVIDIA's NCCL, makes
// the CP group's communicator over the CP communicator and the reducer's device buffer. The
// consensus's in-place MIN on one rank must return its values unchanged, which a reducer that did
// nothing would too; so the same device buffer and stream then carry NCCL's pre-multiplied sum
// (x3), which only a reduction NCCL ran on the GPU, between the upload and the download, can
// produce.
func TestStartMakesTheNCCLReducerOnTheDevice(t *testing.T) {
	if os.Getenv(NCCLLibEnv) == "" {
		t.Fatalf(
			"%s is unset: gpu-check.sh sets it to the libnccl.so.2 it found, and fails the NCCL step when it finds none",
			NCCLLibEnv,
		)
	}
	_, _, _, reducer := startOnSharedSlab(t, "nccl")
	f, ok := reducer.(*deviceNCCLFrontier)
	if !ok {
		t.Fatalf("--collective nccl made a %T reducer, want the device one", reducer)
	}
	if f.comm.Size() != 1 || f.comm.Rank() != 0 {
		t.Fatalf(
			"the CP group's communicator is rank %d of %d, want 0 of 1",
			f.comm.Rank(),
			f.comm.Size(),
		)
	}
	values := []uint64{5, 1 << 63, ^uint64(0), 0, 42, 7, 8, 9, 10}
	want := append([]uint64(nil), values...)
	if err := f.AllreduceMinUint64(values); err != nil {
		t.Fatal(err)
	}
	if !equalWords(values, want) {
		t.Fatalf("in-place MIN on one rank = %v, want %v", values, want)
	}
	if !f.lib.HasPreMulSum() {
		t.Fatalf(
			"%s (NCCL %d) has no ncclRedOpCreatePreMulSum: cannot check a reduction on the device",
			f.lib.Path(),
			f.lib.Version(),
		)
	}
	for i := range want {
		want[i] *= 3
	}
	if err := f.AllreducePreMulSumUint64(values, 3); err != nil {
		t.Fatal(err)
	}
	if !equalWords(values, want) {
		t.Fatalf("PreMulSum x3 through the reducer's device buffer = %v, want %v", values, want)
	}
	t.Logf(
		"proves: NCCL %d from %s made a one-rank communicator over the CP communicator (non-blocking init %v); the device buffer's round trip carried NCCL's x3 reduction (a no-op would not); a one-rank MIN proves only the plumbing",
		f.lib.Version(),
		f.lib.Path(),
		f.lib.HasNonBlockingInit(),
	)
}

func equalWords(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
