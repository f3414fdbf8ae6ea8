package hicache

import "github.com/cphicache/cphicache/hicache/cache"

// The failures a run ends with are the core's (package cache); these names keep them at hand for the commands.
type (
	DivergenceError = cache.DivergenceError
	OutOfStepError  = cache.OutOfStepError
	LocalFailure    = cache.LocalFailure
	PeerFailure     = cache.PeerFailure
	FailureCode     = cache.FailureCode
)

const (
	FailureCopy      = cache.FailureCopy
	FailureDevice    = cache.FailureDevice
	FailureAllocator = cache.FailureAllocator
	FailureInvariant = cache.FailureInvariant
	FailureFlush     = cache.FailureFlush
	FailureMetrics   = cache.FailureMetrics
)
