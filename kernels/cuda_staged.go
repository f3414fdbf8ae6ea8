//go:build cuda

package kernels

// The slabs' side of the CUDA engine: registered with the GPU (the zero-copy path), or staged
// through pinned memory the driver allocates when CUDAStagedEnv asks (the fallback for a machine
// that refuses to register the shared mapping). cudaitems.go plans the chunks and does the staging
// copies in pure Go.

import "os"

// registerSlabs registers the slabs with the GPU, mapped, in the chunks registrationChunks plans.
// With CUDAStagedEnv=1 each chunk gets mapped pinned staging of its size instead, and the slab is
// not registered.
func (e *CUDAEngine) registerSlabs() error {
	e.staged = os.Getenv(CUDAStagedEnv) == "1"
	for _, c := range registrationChunks(slabRanges(e.slabs)) {
		var err error
		if e.staged {
			c.stage, c.devicePtr, err = allocMappedHost(c.bytes)
		} else {
			c.devicePtr, err = registerHostMapped(c.hostAddr, c.bytes)
		}
		if err != nil {
			return err
		}
		e.chunks = append(e.chunks, c)
	}
	return nil
}

// Staged reports whether the engine stages its copies (CUDAStagedEnv) rather than registering the
// slabs.
func (e *CUDAEngine) Staged() bool { return e.staged }

// stageSpans copies the call's spans into the staging (before a scatter) or out of it (after a
// gather).
func (e *CUDAEngine) stageSpans(toStage bool) {
	for _, s := range e.spans {
		stagedCopy(e.chunks, e.slabs[s.Slab][s.SlabOffsetBytes:s.SlabOffsetBytes+s.Bytes], toStage)
	}
}
