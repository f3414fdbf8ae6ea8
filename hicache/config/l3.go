package config

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// L3Options are the run's --l3-* flags. The tier is off when Dir is empty.
type L3Options struct {
	Dir string
	// the byte budget of this job's blocks in the namespace, each CP group's, in the sizing model's
	// KV (--l3-bytes); StoreBytes, set by Size, is the same blocks' budget as the store holds them,
	// less when the copies are scaled down (0 before Size: Bytes)
	Bytes          int64
	StoreBytes     int64
	Namespace      string // free-form: model, weights version, dtype
	BlockTokens    int    // tokens per block, a multiple of the page size
	WritePolicy    cache.L3WritePolicy
	Fsync          bool
	PrefetchPolicy cache.PrefetchPolicy
	// a request prefetches only when at least this many of its tokens are not cached
	PrefetchThreshold int
}

// Store is the store's budget of block bytes, each CP group's: StoreBytes, or Bytes for options
// that did not go through Size.
func (o *L3Options) Store() int64 {
	if o.StoreBytes == 0 {
		return o.Bytes
	}
	return o.StoreBytes
}

// Enabled says whether the run has an L3.
func (o *L3Options) Enabled() bool { return o.Dir != "" }

// Validate checks the L3 flags that need no MPI, the directory included: a missing or unwritable
// --l3-dir fails here, before any shared memory exists.
func (o *L3Options) Validate(pageTokens int) error {
	if !o.Enabled() {
		return nil
	}
	// The block size and the threshold are the core's to check (it refuses them too); the budget
	// and the directory are the options'.
	if err := (&cache.L3Config{
		BlockTokens: o.BlockTokens, PrefetchThreshold: o.PrefetchThreshold, BatchRequests: 1,
	}).Validate(pageTokens); err != nil {
		return err
	}
	if o.Bytes < 1 {
		return &errscope.ConfigError{
			Flag:   "l3-bytes",
			Reason: fmt.Sprintf("%d: the L3 needs a budget of 1 byte or more", o.Bytes),
		}
	}
	return l3.CheckDir(o.Dir) // a read-only one is served read-only (l3.Store.ReadOnly)
}

// BlockNamespace is everything that changes a block's bytes in this run: the L2's geometry (bytes
// per token as copied), the content seed and --l3-namespace.
func (o *L3Options) BlockNamespace(g pool.Geometry, seed uint64) l3.Namespace {
	return l3.Namespace{
		Layers:      g.Layers,
		Payloads:    g.PayloadsPerLayer,
		PageTokens:  g.PageTokens,
		TokenBytes:  g.TokenBytes,
		CPSize:      g.CPSize,
		Nodes:       g.Nodes,
		ContentSeed: seed,
		Content:     cache.ContentVersion,
		Name:        o.Namespace,
	}
}
