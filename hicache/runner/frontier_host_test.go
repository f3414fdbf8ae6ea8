//go:build !cuda

package runner

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/transport"
	"github.com/cphicache/cphicache/internal/errscope"
)

// reducerBuffer is where the NCCL reducer of this build reduces, for the tests' log lines.
const reducerBuffer = "pinned host memory, ncclshim"

// noteDeviceRuns marks a test that ran on the GPU (frontier_cuda_test.go); the CPU build has no
// GPU.
func noteDeviceRuns(*testing.T) {}

// ncclForTest needs the ncclshim that make (nccl/nccl.mk) builds and names in CPHICACHE_NCCL_LIB,
// and turns on the CPU build's host-buffer test switch for the test.
func ncclForTest(t *testing.T) {
	t.Helper()
	if os.Getenv(transport.NCCLLibEnv) == "" {
		t.Skipf("%s is unset: make test builds ncclshim and sets it", transport.NCCLLibEnv)
	}
	t.Setenv(transport.NCCLHostBuffersEnv, "1")
}

// TestRunOverNCCLShimCommitsOnCPCommunicators drives writing_check through the NCCL binding
// (dlopen'ed ncclshim, a communicator per CP group made over the CP communicator, in-place MIN) for
// a whole run.
func TestRunOverNCCLShimCommitsOnCPCommunicators(t *testing.T) {
	ncclForTest(t)
	r, err := runTesting(testJob(t), ncclRunOptions(t), checked())
	if err != nil {
		t.Fatal(err)
	}
	if r.Transport != "nccl" {
		t.Errorf("the report's collective is %q, want nccl", r.Transport)
	}
	if r.Placement.Divergences != 0 || r.Verify.Mismatches != 0 || r.Verify.PagesChecked == 0 {
		t.Errorf(
			"%d divergences, %d mismatches of %d pages checked",
			r.Placement.Divergences,
			r.Verify.Mismatches,
			r.Verify.PagesChecked,
		)
	}
	if r.Backup.Reserved == 0 || r.Backup.Committed != r.Backup.Reserved {
		t.Errorf(
			"%d backups reserved, %d committed: writing_check over NCCL did not commit them all",
			r.Backup.Reserved,
			r.Backup.Committed,
		)
	}
	checkReportScoping(t, r)
	checkNoLeakedSegments(t)
}

func TestCPUBuildRefusesNCCLWithoutTheTestSwitch(t *testing.T) {
	t.Setenv(transport.NCCLHostBuffersEnv, "")
	opts := smallOptions()
	opts.Collective = "nccl"
	var ce *errscope.ConfigError
	if err := CheckOptions(opts); !errors.As(err, &ce) || ce.Flag != "collective" ||
		!strings.Contains(ce.Reason, "GPU build") {
		t.Errorf("Validate: %v, want an invalid --collective error that names the GPU build", err)
	}
}
