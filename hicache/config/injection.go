package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
)

// Injection names a rank and a step for fault injection (--inject-divergence RANK@STEP and
// friends).
type Injection struct {
	Rank int
	Step int64
	Set  bool
}

// ParseInjection reads RANK@STEP; flag names the flag for errors.
func ParseInjection(flag, s string) (Injection, error) {
	if s == "" {
		return Injection{}, nil
	}
	rank, step, ok := strings.Cut(s, "@")
	r, err1 := strconv.Atoi(rank)
	st, err2 := strconv.ParseInt(step, 10, 64)
	if !ok || err1 != nil || err2 != nil || r < 0 || st < 1 {
		return Injection{}, &errscope.ConfigError{
			Flag:   flag,
			Reason: fmt.Sprintf("%q is not RANK@STEP (a world rank >= 0 and a step >= 1)", s),
		}
	}
	return Injection{Rank: r, Step: st, Set: true}, nil
}

// Hits says whether the injection fires on worldRank at step.
func (inj Injection) Hits(worldRank int, step int64) bool {
	return inj.Set && inj.Rank == worldRank && inj.Step == step
}

// ParseRankInjection reads RANK, a world rank (--inject-setup-error); flag names the flag for
// errors.
func ParseRankInjection(flag, s string) (Injection, error) {
	if s == "" {
		return Injection{}, nil
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return Injection{}, &errscope.ConfigError{
			Flag:   flag,
			Reason: fmt.Sprintf("%q is not RANK (a world rank >= 0)", s),
		}
	}
	return Injection{Rank: r, Set: true}, nil
}

// NamedInjection is an injection with its flag.
type NamedInjection struct {
	Flag      string
	Injection Injection
}

// Injections are every fault injection, in a fixed order every rank shares; --inject-setup-error,
// which fires before the replay, always, comes last.
func (o *Options) Injections() []NamedInjection {
	return []NamedInjection{
		{"inject-divergence", o.InjectDivergence},
		{"inject-copy-error", o.InjectCopyError},
		{
			"inject-hang",
			o.InjectHang,
		},
		{"inject-exit", o.InjectExit},
		{"inject-stuck-copy", o.InjectStuckCopy},
		{"inject-setup-error", o.InjectSetupError},
	}
}

// InjectionFlags are the faults a run's end can miss: all but --inject-setup-error.
func (o *Options) InjectionFlags() []NamedInjection {
	all := o.Injections()
	return all[:len(all)-1]
}

// CheckInjectionRanks refuses a fault injection aimed at a rank the job does not have: it would
// silently not happen, and a validation that expects it would pass for the wrong reason. A
// divergence needs a CP group of two ranks or more: a group of one compares no placement, so
// nothing could catch it.
func (o *Options) CheckInjectionRanks(worldSize, cpSize int) error {
	if o.InjectDivergence.Set && cpSize < 2 {
		return &errscope.ConfigError{
			Flag:   "inject-divergence",
			Reason: "needs a CP group of 2 ranks or more: at cp 1 no placement is compared, so nothing could catch it",
		}
	}
	for _, inj := range o.Injections() {
		if inj.Injection.Set && inj.Injection.Rank >= worldSize {
			return &errscope.ConfigError{
				Flag: inj.Flag,
				Reason: fmt.Sprintf(
					"rank %d is outside the job's %d ranks (world ranks 0 to %d)",
					inj.Injection.Rank,
					worldSize,
					worldSize-1,
				),
			}
		}
	}
	return nil
}
