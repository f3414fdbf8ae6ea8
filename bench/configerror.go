package bench

import (
	"fmt"

	"github.com/cphicache/cphicache/internal/errscope"
)

// configErrorf is a benchmark's config field out of its range, as the *errscope.ConfigError of the
// command-line flag that sets it (flag is its name, without the dashes).
func configErrorf(flag, format string, args ...any) error {
	return &errscope.ConfigError{Flag: flag, Reason: fmt.Sprintf(format, args...)}
}

// bound is a count and the least value it may take.
type bound struct {
	field      string
	value, min int
}

// firstBelow returns a *errscope.ConfigError for the first bound that is not met, or nil.
func firstBelow(bounds ...bound) error {
	for _, b := range bounds {
		if b.value < b.min {
			return configErrorf(b.field, "%d must be %d or more", b.value, b.min)
		}
	}
	return nil
}
