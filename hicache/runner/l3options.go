package runner

import (
	"fmt"
	"time"

	"github.com/cphicache/cphicache/hicache/cache"
	"github.com/cphicache/cphicache/hicache/l3"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// The timeout policy's deadline: SGLang's defaults, a base plus a share per thousand tokens, capped.
const (
	prefetchTimeoutBase  = 2 * time.Second
	prefetchTimeoutPer1K = 100 * time.Millisecond
	prefetchTimeoutMax   = 30 * time.Second
)

// prefetchTimeout is how long the timeout policy waits for a prefetch of tokens tokens.
func prefetchTimeout(tokens int) time.Duration {
	return min(prefetchTimeoutBase+time.Duration(tokens)*prefetchTimeoutPer1K/1000, prefetchTimeoutMax)
}

// L3Options are the run's --l3-* flags. The tier is off when Dir is empty.
type L3Options struct {
	Dir               string
	Bytes             int64  // the byte budget of this job's blocks in the namespace
	Namespace         string // free-form: model, weights version, dtype
	BlockTokens       int    // tokens per block, a multiple of the page size
	WritePolicy       cache.L3WritePolicy
	Fsync             bool
	PrefetchPolicy    cache.PrefetchPolicy
	PrefetchThreshold int // a request prefetches only when at least this many of its tokens are not cached

	// Tests only, each on the rank that sets it: every block write fails as on a full filesystem; every read
	// fails as on a bad disk; the existence check misses every block whose key is 0 mod 3, as on a shared
	// filesystem whose view lags.
	testFailWrites, testFailReads, testHideBlocks bool
	testReadOnly                                  bool // the directory refuses writes, as a read-only mount does
	// readFailuresExpected: validate's injected read failures are what its l3_roundtrip row counts, so the first
	// is not said as a warning (a passing validate prints no WARN).
	readFailuresExpected bool
	// testIgnoreFailedReads (tests only) uses every prefetched block even when the group agreed a read failed:
	// the bug validate's L3 row exists to catch.
	testIgnoreFailedReads bool
	// testSlowWrites and testSlowReads (tests only) delay every block write or read: writes still in flight at
	// the next flush, reads not done when best_effort stops waiting.
	testSlowWrites, testSlowReads bool
	// testCorruptGathered (tests only) flips a byte of every block this rank gathers, before its check.
	testCorruptGathered bool
	// testHangReads (tests only) holds every read until the end of the run, as a hung filesystem would: each is
	// given up at its deadline.
	testHangReads bool
	// testFS (tests only) is the filesystem the store keeps its blocks on instead of the operating system's: the
	// Env under simulation's shared, fault-injecting l3.MemFS (envsim_fs_test.go).
	testFS l3.FS
}

// Enabled says whether the run has an L3.
func (o *L3Options) Enabled() bool { return o.Dir != "" }

// validate checks the L3 flags that need no MPI, the directory included: a missing or unwritable --l3-dir fails
// here, before any shared memory exists.
func (o *L3Options) validate(pageTokens int) error {
	if !o.Enabled() {
		return nil
	}
	// The block size and the threshold are the core's to check (it refuses them too); the budget and the
	// directory are the runner's.
	if err := (&cache.L3Config{BlockTokens: o.BlockTokens, PrefetchThreshold: o.PrefetchThreshold, BatchRequests: 1}).Validate(pageTokens); err != nil {
		return err
	}
	if o.Bytes < 1 {
		return &errscope.ConfigError{Flag: "l3-bytes", Reason: fmt.Sprintf("%d: the L3 needs a budget of 1 byte or more", o.Bytes)}
	}
	return l3.CheckDir(o.Dir) // a read-only one is served read-only (l3.Store.ReadOnly)
}

// namespace is everything that changes a block's bytes in this run: the L2's geometry (bytes per token as
// copied), the content seed and --l3-namespace.
func (o *L3Options) namespace(g pool.Geometry, seed uint64) l3.Namespace {
	return l3.Namespace{Layers: g.Layers, Payloads: g.PayloadsPerLayer, PageTokens: g.PageTokens, TokenBytes: g.TokenBytes,
		CPSize: g.CPSize, Nodes: g.Nodes, ContentSeed: seed, Content: cache.ContentVersion, Name: o.Namespace}
}
