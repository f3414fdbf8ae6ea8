package kernels

import "fmt"

// Span is one contiguous copy between the device KV buffer and one slab.
//
// Gather copies device[DeviceOffsetBytes, +Bytes) to slabs[Slab][SlabOffsetBytes, +Bytes); Scatter
// copies the other way. The destination ranges of one span list must not overlap each other (copies
// run in parallel, so overlapping destinations would give an unspecified result); the sources may
// overlap freely.
type Span struct {
	DeviceOffsetBytes int64
	Slab              int32
	SlabOffsetBytes   int64
	Bytes             int64
}

// end returns the half-open end of the span on the device side.
func (s Span) deviceEnd() int64 { return s.DeviceOffsetBytes + s.Bytes }

// slabEnd returns the half-open end of the span on the slab side.
func (s Span) slabEnd() int64 { return s.SlabOffsetBytes + s.Bytes }

// continues reports whether next starts exactly where s ends on both sides, in the same slab, so
// that the two copies are one.
func (s Span) continues(next Span) bool {
	return next.Slab == s.Slab && next.DeviceOffsetBytes == s.deviceEnd() &&
		next.SlabOffsetBytes == s.slabEnd()
}

// Coalesce merges spans that are adjacent on BOTH sides (same slab, the next span starting where
// the previous one ends on the device and in the slab) and drops zero-length spans, in place and in
// stable order, and returns the shortened slice. Only neighbours in the given order are merged:
// callers pass spans in the order they built them (for layer_first, consecutive pages of one layer
// and payload follow each other, and so become one copy).
func Coalesce(spans []Span) []Span {
	out := 0
	for _, s := range spans {
		if s.Bytes == 0 {
			continue
		}
		if out > 0 && spans[out-1].continues(s) {
			spans[out-1].Bytes += s.Bytes
			continue
		}
		spans[out] = s
		out++
	}
	return spans[:out]
}

// SpanError is the error for a span list that cannot be copied; Index is the span's index in the
// caller's list.
type SpanError struct {
	Index  int
	Span   Span
	Reason string
}

func (e *SpanError) Error() string {
	s := e.Span
	return fmt.Sprintf("kernels: span %d {device %d, slab %d at %d, %d bytes}: %s",
		e.Index, s.DeviceOffsetBytes, s.Slab, s.SlabOffsetBytes, s.Bytes, e.Reason)
}

// validateSpans checks every span against the device buffer and slab sizes, once per list and not
// per byte, and returns the total bytes to copy. Sums are checked against overflow so that a
// hostile offset cannot wrap into range.
func validateSpans(
	spans []Span,
	deviceBytes int64,
	slabBytes []int64,
) (totalBytes int64, err error) {
	for i, s := range spans {
		if reason := spanProblem(s, deviceBytes, slabBytes); reason != "" {
			return 0, &SpanError{Index: i, Span: s, Reason: reason}
		}
		totalBytes += s.Bytes
	}
	return totalBytes, nil
}

// spanProblem returns why s cannot be copied, or "" when it can.
func spanProblem(s Span, deviceBytes int64, slabBytes []int64) string {
	switch {
	case s.Bytes < 0:
		return "negative length"
	case s.DeviceOffsetBytes < 0 || s.DeviceOffsetBytes > deviceBytes || s.Bytes > deviceBytes-s.DeviceOffsetBytes:
		return fmt.Sprintf("out of the device buffer [0, %d)", deviceBytes)
	case s.Slab < 0 || int(s.Slab) >= len(slabBytes):
		return fmt.Sprintf("no such slab (have %d)", len(slabBytes))
	}
	limit := slabBytes[s.Slab]
	if s.SlabOffsetBytes < 0 || s.SlabOffsetBytes > limit || s.Bytes > limit-s.SlabOffsetBytes {
		return fmt.Sprintf("out of slab %d [0, %d)", s.Slab, limit)
	}
	return ""
}
