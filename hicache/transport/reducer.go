package transport

// MinAllReducer is the transport of the step consensus's MIN all-reduce over a CP group: NCCL on
// the device in the GPU build (--collective nccl). A nil MinAllReducer means MPI on the CP
// communicator, which the consensus does itself.
type MinAllReducer interface {
	Name() string
	AllreduceMinUint64(values []uint64) error // in place
}
