package nccl

import (
	"fmt"
	"time"
)

// Bootstrap is what NewCommOverMPI needs of an MPI communicator; *mpi.Comm has it. An interface
// rather than the mpi package, so that this package links no MPI: the one-rank device check
// (nccl/devicecheck) then runs on a GPU machine that has no MPI library at all.
type Bootstrap interface {
	Rank() int
	Size() int
	Name() string
	BcastBytes(buf []byte, root int) error
}

// NewCommOverMPI makes the NCCL communicator of an MPI communicator's ranks (in cphicache, one CP
// group): rank 0 makes the unique id and broadcasts it over mpiComm, and every rank joins with its
// MPI rank as its NCCL rank. Every rank of mpiComm must call it, from the MPI goroutine. If rank 0
// cannot make an id, every rank returns an error (none is left waiting in ncclCommInitRank).
// initTimeout bounds NCCL's init where the library allows (InitRankWithin); 0 means no bound.
func NewCommOverMPI(lib *Library, mpiComm Bootstrap, initTimeout time.Duration) (*Comm, error) {
	// Byte 0 says whether rank 0 made an id; the id follows.
	buf := make([]byte, 1+UniqueIDBytes)
	var idErr error
	if mpiComm.Rank() == 0 {
		var id UniqueID
		if id, idErr = lib.UniqueID(); idErr == nil {
			buf[0] = 1
			copy(buf[1:], id[:])
		}
	}
	if err := mpiComm.BcastBytes(buf, 0); err != nil {
		return nil, fmt.Errorf("nccl: broadcasting the unique id over %s: %w", mpiComm.Name(), err)
	}
	if buf[0] != 1 {
		if idErr != nil {
			return nil, idErr
		}
		return nil, fmt.Errorf("nccl: rank 0 of %s could not make a unique id", mpiComm.Name())
	}
	var id UniqueID
	copy(id[:], buf[1:])
	return lib.InitRankWithin(id, mpiComm.Size(), mpiComm.Rank(), initTimeout)
}
