package bench

import "fmt"

// FieldError is a benchmark's config field out of its range. Field is named as the command-line flag that sets
// it, so that the command can name the flag without reading the message.
type FieldError struct{ Field, Reason string }

func (e *FieldError) Error() string { return fmt.Sprintf("%s: %s", e.Field, e.Reason) }

func fieldErrorf(field, format string, args ...any) error {
	return &FieldError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// bound is a count and the least value it may take.
type bound struct {
	field      string
	value, min int
}

// firstBelow returns a *FieldError for the first bound that is not met, or nil.
func firstBelow(bounds ...bound) error {
	for _, b := range bounds {
		if b.value < b.min {
			return fieldErrorf(b.field, "%d must be %d or more", b.value, b.min)
		}
	}
	return nil
}
