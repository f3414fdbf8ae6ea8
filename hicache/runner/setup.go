package runner

import (
	"fmt"
	"strconv"

	"github.com/cphicache/cphicache/internal/errscope"
)

// ParseRankInjection reads RANK, a world rank (--inject-setup-error); flag names the flag for errors.
func ParseRankInjection(flag, s string) (Injection, error) {
	if s == "" {
		return Injection{}, nil
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return Injection{}, &errscope.ConfigError{Flag: flag, Reason: fmt.Sprintf("%q is not RANK (a world rank >= 0)", s)}
	}
	return Injection{Rank: r, Set: true}, nil
}
