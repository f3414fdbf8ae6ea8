// Package errscope says which ranks of a job reach an error alike, and so which rank prints it: the
// error types that every layer returns (a bad flag's ConfigError, a failure every rank of a group
// or of the job shares, a result that did not check everything), and the counts those messages say.
// It holds types and text only, so that the IO-free cache core, the L3 store and the report can
// name a scope without linking MPI; spmd re-exports the scopes and agrees on failures over MPI.
//
// It imports nothing of this module.
package errscope

import (
	"errors"
	"fmt"
)

// Scope says which ranks reach an error alike.
type Scope int

const (
	RankScope Scope = iota // this rank alone: printed by it, naming the rank
	// every rank of one CP group alike (a divergence): printed once, by the group's CP rank 0
	GroupScope
	// every rank of the job alike (a bad flag, a verdict aggregated over the job): once, by world
	// rank 0
	JobScope
)

// Scoped is an error that knows its scope; an error that does not is RankScope.
type Scoped interface{ Scope() Scope }

// Of returns err's scope.
func Of(err error) Scope {
	var s Scoped
	if errors.As(err, &s) {
		return s.Scope()
	}
	return RankScope
}

// ConfigError is a start-up error caused by a flag value; its message names the flag. Every rank
// sees the same flags, so every rank finds the same ConfigError.
type ConfigError struct{ Flag, Reason string }

func (e *ConfigError) Error() string { return fmt.Sprintf("invalid --%s: %s", e.Flag, e.Reason) }
func (e *ConfigError) Scope() Scope  { return JobScope }

// JobWide marks an error every rank of the job reaches alike (an environment setting read by every
// rank).
type JobWide struct{ Err error }

func (e *JobWide) Error() string { return e.Err.Error() }
func (e *JobWide) Unwrap() error { return e.Err }
func (e *JobWide) Scope() Scope  { return JobScope }
