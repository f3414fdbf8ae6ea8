package transport

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cphicache/cphicache/hicache/spmd"
	"github.com/cphicache/cphicache/nccl"
)

// The step consensus over NCCL (--collective nccl), the parts both builds share. The GPU build
// (nccl_cuda.go) reduces the vector in device memory with NVIDIA's NCCL; the CPU build
// (nccl_host.go) can only drive the same code path through ncclshim, the test stand-in of
// nccl/testdata that reduces host memory with MPI, and only when a test asks for it explicitly.
const (
	// NCCLLibEnv names the libnccl.so.2 to load; unset, the dynamic loader's search finds one
	// (nccl.DefaultPath). It is the variable the nccl package's tests read, so under make it points
	// at the shim.
	NCCLLibEnv = "CPHICACHE_NCCL_LIB"
	// NCCLHostBuffersEnv=1 (tests only) lets the CPU build run --collective nccl on host buffers,
	// which is honest only with ncclshim: NVIDIA's NCCL reads device memory. The CPU build refuses
	// any other library.
	NCCLHostBuffersEnv = "CPHICACHE_NCCL_HOST_BUFFERS"
	// ncclShimErrorPrefix starts every string ncclshim returns: how a loaded library shows it is
	// the shim.
	ncclShimErrorPrefix = "ncclshim: "
)

// loadNCCL loads the library named by CPHICACHE_NCCL_LIB (or the default soname).
func loadNCCL() (*nccl.Library, error) {
	lib, err := nccl.Load(os.Getenv(NCCLLibEnv))
	if err != nil {
		return nil, fmt.Errorf(
			"--collective nccl: %w (set %s to the path of libnccl.so.2)",
			err,
			NCCLLibEnv,
		)
	}
	return lib, nil
}

// IsNCCLShim reports whether lib is ncclshim rather than NVIDIA's NCCL: the shim's strings carry
// its name.
func IsNCCLShim(lib *nccl.Library) bool {
	return strings.HasPrefix(lib.ErrorString(nccl.Success), ncclShimErrorPrefix)
}

// newNCCLCommOnCP makes the NCCL communicator of this rank's CP group: never the world (the scoping
// rule). Every rank of the job calls it at start-up, and every rank returns an error if any rank
// failed before the communicator exists (loading the library, say), so that no rank waits in the
// unique id's broadcast for a peer that gave up. ready is this rank's outcome so far. NCCL's init
// is bounded by initTimeout (0: none) and its outcome agreed too, so that one rank's failed or
// expired init ends every rank.
func newNCCLCommOnCP(
	t *spmd.Topology,
	lib *nccl.Library,
	ready error,
	initTimeout time.Duration,
) (*nccl.Comm, error) {
	if err := spmd.AgreeOnFailure(t.World, ready); err != nil {
		return nil, err
	}
	comm, err := nccl.NewCommOverMPI(lib, t.CP, initTimeout)
	if err := spmd.AgreeOnFailure(t.World, err); err != nil {
		if comm != nil {
			comm.Abort()
		}
		return nil, err
	}
	if comm.Size() != t.CPSize || comm.Rank() != t.CPRank {
		// NewCommOverMPI promises NCCL rank = CP rank; check it once, as the report's scoping check
		// relies on it.
		return nil, errors.Join(
			fmt.Errorf(
				"NCCL communicator is rank %d of %d, CP rank %d of %d",
				comm.Rank(),
				comm.Size(),
				t.CPRank,
				t.CPSize,
			),
			comm.Abort(),
		)
	}
	return comm, nil
}

// Close releases a reducer's communicator, buffers and library; the MPI one holds nothing.
func Close(f MinAllReducer) error {
	if c, ok := f.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}
