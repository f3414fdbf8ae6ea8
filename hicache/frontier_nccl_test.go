package hicache

import (
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/transport"
)

// TestNCCLFrontierReducesMinInPlace checks the build's NCCL reducer alone (host buffers over ncclshim in the
// CPU build, device buffers over NVIDIA's NCCL in the cuda build): the MIN of every CP rank's value,
// written back into the caller's slice, and a call longer than the buffer refused.
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
