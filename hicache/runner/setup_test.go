package runner

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/nccl"
)

// The guarded start-up (transport/start.go): a set-up failure on one rank, or an NCCL init that
// cannot complete, ends every rank with one message and leaves no rank waiting and no shared memory
// behind.

func TestParseRankInjection(t *testing.T) {
	if inj, err := config.ParseRankInjection("inject-setup-error", "3"); err != nil || !inj.Set ||
		inj.Rank != 3 {
		t.Errorf("\"3\": %+v, %v", inj, err)
	}
	if inj, err := config.ParseRankInjection("inject-setup-error", ""); err != nil || inj.Set {
		t.Errorf("empty: %+v, %v; want unset", inj, err)
	}
	for _, bad := range []string{"-1", "1@2", "one"} {
		var ce *errscope.ConfigError
		if _, err := config.ParseRankInjection("inject-setup-error", bad); !errors.As(err, &ce) ||
			ce.Flag != "inject-setup-error" {
			t.Errorf("%q: %v, want an error naming --inject-setup-error", bad, err)
		}
	}
}

// TestInjectedSetupErrorEndsEveryRankWithItsMessage fails the copy engine's set-up on the last
// world rank: every rank must return (none waits for it), that rank speaking with its own message
// and the others quiet.
func TestInjectedSetupErrorEndsEveryRankWithItsMessage(t *testing.T) {
	for _, collective := range []string{"mpi", "nccl"} {
		t.Run(collective, func(t *testing.T) {
			if collective == "nccl" {
				ncclForTest(t)
			}
			opts := smallOptions()
			opts.Collective = collective
			failing := testWorld.Size() - 1
			opts.InjectSetupError = config.Injection{Rank: failing, Set: true}
			_, err := runTesting(testJob(t), opts, checked())
			checkSetupFailure(t, err, failing, "injected set-up failure on world rank")
			checkNoLeakedSegments(t)
		})
	}
}

// checkSetupFailure checks the agreed outcome of a start-up failure on world rank failing (-1: on
// every rank, rank 0 speaking).
func checkSetupFailure(t *testing.T, err error, failing int, message string) {
	t.Helper()
	var shared *spmd.SharedError
	if !errors.As(err, &shared) {
		t.Fatalf("rank %d: %v, want the agreed start-up failure", testWorld.Rank(), err)
	}
	speaker := failing == testWorld.Rank() || (failing < 0 && testWorld.Rank() == 0)
	switch {
	case shared.Speaker != speaker:
		t.Errorf("rank %d speaks: %v, want %v (%v)", testWorld.Rank(), shared.Speaker, speaker, err)
	case speaker && !strings.Contains(err.Error(), message):
		t.Errorf("rank %d: %q does not say %q", testWorld.Rank(), err, message)
	case failing >= 0 && !speaker && !errors.As(err, new(spmd.PeerFailedError)):
		t.Errorf("rank %d: %v, want the peer-failure error", testWorld.Rank(), err)
	}
}

// TestNCCLInitThatNeverCompletesIsAbortedOnEveryRank: ncclshim keeps every rank's non-blocking init
// in progress (a peer that never arrives); each rank gives up at the bound derived from the
// watchdog's timeout, aborts its communicator and the failure is agreed, before the watchdog (which
// would end this test process) fires.
func TestNCCLInitThatNeverCompletesIsAbortedOnEveryRank(t *testing.T) {
	ncclShimForTest(t)
	t.Setenv("NCCLSHIM_INIT_HANG", "1")
	opts := smallOptions()
	opts.Collective = "nccl"
	// The init bound is 3/4 of it, 3.75 s; the watchdog fires a second after the 5 s (its
	// collective grace), so the 2.25 s past the bound cover the bootstrap collectives before the
	// init, the abort and the agreement, at np 16 on 2 cores too. (8 s cost the suite 6 s a launch
	// over seven launches: the SPMD packages' longest test.)
	opts.WatchdogTimeout = 5 * time.Second
	start := time.Now()
	_, err := runTesting(testJob(t), opts, checked())
	if waited := time.Since(start); waited < transport.NCCLInitTimeout(opts.WatchdogTimeout) {
		t.Errorf(
			"gave up after %v, before the init bound %v",
			waited,
			transport.NCCLInitTimeout(opts.WatchdogTimeout),
		)
	}
	checkSetupFailure(t, err, -1, "ncclCommInitRankConfig")
	if !errors.Is(err, nccl.Timeout) {
		t.Errorf("rank %d: %v, want ncclTimeout", testWorld.Rank(), err)
	}
	checkNoLeakedSegments(t)
}

// ncclShimForTest is ncclForTest for a test that steers ncclshim's switches (NCCLSHIM_INIT_HANG),
// which NVIDIA's NCCL ignores: it skips unless CPHICACHE_NCCL_LIB is the shim, so always in the GPU
// build (whose ncclForTest skips the shim) on a GPU machine.
func ncclShimForTest(t *testing.T) {
	t.Helper()
	ncclForTest(t)
	if reason := notNCCLShim(os.Getenv(transport.NCCLLibEnv)); reason != "" {
		t.Skip(reason)
	}
}

// notNCCLShim says why the library at path is not ncclshim, or "" when it is (or does not load: the
// test then fails on it, as it should).
func notNCCLShim(path string) string {
	lib, err := nccl.Load(path)
	if err != nil {
		return ""
	}
	defer lib.Close()
	if transport.IsNCCLShim(lib) {
		return ""
	}
	return fmt.Sprintf(
		"%s is NCCL %s, not ncclshim: the test steers NCCLSHIM_INIT_HANG, which NVIDIA's NCCL ignores",
		lib.Path(),
		nccl.VersionString(lib.Version()),
	)
}

// TestShimSwitchTestsRunOverTheShim: the skip above must not skip the shim itself, which the CPU
// build's tests load (under make, CPHICACHE_NCCL_LIB names it).
func TestShimSwitchTestsRunOverTheShim(t *testing.T) {
	path := os.Getenv(transport.NCCLLibEnv)
	if path == "" {
		t.Skipf("%s is unset: make test builds ncclshim and sets it", transport.NCCLLibEnv)
	}
	lib, err := nccl.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	defer lib.Close()
	if reason := notNCCLShim(path); transport.IsNCCLShim(lib) && reason != "" {
		t.Errorf("ncclshim at %s would skip the tests that need it: %s", path, reason)
	}
}
