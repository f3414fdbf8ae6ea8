// Package runnertest holds the fixtures of the SPMD tests that the runner's and validate's tests
// share: the CP layout each launch size runs, a job over it, a workload small enough for 16 ranks
// on 2 cores, a directory every rank of the job shares, and the check that no shared memory is
// left. It is for _test.go files only: nothing else imports it, and it imports no runner (the
// runner's own tests import it).
package runnertest

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/shm"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/mpi"
	"github.com/cphicache/cphicache/pool"
)

// JobID names the segments a test binary creates: CPHICACHE_JOB_ID where the Makefile gives each
// mpirun its own, else the process's id. The leak checks look only at this job's segments, so that
// other cphicache jobs on the same machine (another engineer's suite) neither fail them nor hide
// behind them.
var JobID = func() string {
	if id := os.Getenv("CPHICACHE_JOB_ID"); id != "" {
		return id
	}
	return fmt.Sprintf("test_p%d", os.Getpid())
}()

// Layout is the CP layout the SPMD tests use at each launch size: one CP group of all ranks, except
// at 16 ranks, where it is the CP8DP2 layout users validate before production.
func Layout(world *mpi.Comm) (cp, dp int) {
	if n := world.Size(); n == 16 {
		return 8, 2
	}
	return world.Size(), 1
}

// Job is a job over world in its Layout, closed when the test ends.
func Job(t *testing.T, world *mpi.Comm) *spmd.Job {
	t.Helper()
	cp, dp := Layout(world)
	topo, err := spmd.NewTopology(world, cp, dp)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(topo.Close)
	return &spmd.Job{Topo: topo, Log: slog.Default(), Cleanup: &spmd.Cleanup{}}
}

// SmallOptions is a workload small enough for 16 ranks on 2 cores, for dp replicas, with caches
// small enough that L1 evictions, load-backs, L2 evictions and a flush all happen.
func SmallOptions(dp int) *config.Options {
	syn := workload.DefaultSyntheticConfig()
	// Each DP replica serves its own share of the conversations: scale them so that every replica
	// is as busy.
	syn.Conversations, syn.TurnsMax, syn.SystemPrompts = 24*dp, 6, 3
	syn.SystemPromptTokens, syn.TurnTokens, syn.OutputTokens = 128, 48, 32
	syn.FlushEvery = 50 * dp
	return &config.Options{
		Layers: 2, PayloadsPerLayer: 2, PageTokens: 16, TokenBytes: 16, DevicePages: 192, L2Slots: 160,
		SlabBytesMax: 1 << 20, Layout: pool.LayerFirst, Policy: cache.WriteThrough, BatchRequests: 3,
		PlacementAssertEvery: 4, Seed: 7, VocabSize: 32000, Synthetic: syn, Collective: "mpi",
		WatchdogTimeout: 60 * time.Second, JobID: JobID, Quiet: true,
	}
}

// CheckedCore is the core's checks every test's run makes: its step invariants and its eviction
// model.
var CheckedCore = cache.Testing{CheckInvariants: true, CheckEvictions: true}

// CheckNoLeakedSegments fails the test when this job's shared-memory segments are left.
func CheckNoLeakedSegments(t *testing.T) {
	t.Helper()
	if leaked, err := shm.JobSegments(JobID); err != nil || len(leaked) != 0 {
		t.Errorf("shared memory left behind: %v %v", leaked, err)
	}
}

// SharedTempDir is a directory every rank of the job uses: world rank 0 makes it and sends its
// name; it is removed after every rank is done with it.
func SharedTempDir(t *testing.T, world *mpi.Comm) string {
	t.Helper()
	name := make([]byte, 256)
	if world.Rank() == 0 {
		dir, err := os.MkdirTemp("", "cphicache-l3-test-")
		if err != nil {
			t.Fatal(err)
		}
		copy(name, dir)
	}
	if err := world.BcastBytes(name, 0); err != nil {
		t.Fatal(err)
	}
	dir := string(bytes.TrimRight(name, "\x00"))
	t.Cleanup(func() {
		world.Barrier()
		if world.Rank() == 0 {
			os.RemoveAll(dir)
		}
	})
	return dir
}
