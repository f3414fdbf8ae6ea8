package timeline

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A rank's timeline on its way to world rank 0: a fixed header, the names, then the spans at a
// fixed size each. Little-endian throughout; the ranks of a job run one build, so the format needs
// no version beyond its magic.

// RankRecord is one rank's timeline: who it is, what its window kept, and its spans.
type RankRecord struct {
	WorldRank, CPGroup, CPRank int
	Window                     Window
	SpanCap                    int // the most spans the rank kept
	// steps whose span was kept (within the window, before the cap)
	StepsKept           int64
	FirstStep, LastStep int64 // the first and last of them (0 when none)
	Dropped             int64 // spans past the cap
	// the step in which the workload ended (0: it did not): every step from it on is kept
	StreamEndStep int64
	Names         []string
	Spans         []Span
}

// Record is the recorder's timeline, for rank worldRank of CP group cpGroup (CP rank cpRank).
func (r *Recorder) Record(worldRank, cpGroup, cpRank int) RankRecord {
	return RankRecord{
		WorldRank:     worldRank,
		CPGroup:       cpGroup,
		CPRank:        cpRank,
		Window:        r.window,
		SpanCap:       r.maxSpans,
		StepsKept:     r.stepsKept,
		FirstStep:     r.firstStep,
		LastStep:      r.lastStep,
		Dropped:       r.dropped,
		StreamEndStep: r.streamEndAt,
		Names:         r.names,
		Spans:         r.spans,
	}
}

const (
	magic       = "cphtl1\x00\x00"
	headerWords = 13 // the record's fields to StreamEndStep, then the counts of names and spans
	spanBytes   = 1 + 2 + 6*8
)

// Encode is the record as bytes, for the gather.
func (rr *RankRecord) Encode() []byte {
	b := make([]byte, 0, len(magic)+8*headerWords+len(rr.Spans)*spanBytes)
	b = append(b, magic...)
	for _, v := range []int64{int64(rr.WorldRank), int64(rr.CPGroup), int64(rr.CPRank), rr.Window.Steps,
		rr.Window.Every, int64(rr.SpanCap), rr.StepsKept, rr.FirstStep, rr.LastStep, rr.Dropped, rr.StreamEndStep,
		int64(len(rr.Names)), int64(len(rr.Spans))} {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	for _, n := range rr.Names {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(n)))
		b = append(b, n...)
	}
	for _, s := range rr.Spans {
		b = append(b, byte(s.Kind))
		b = binary.LittleEndian.AppendUint16(b, s.Name)
		for _, v := range []int64{s.Step, s.StartNs, s.DurNs, s.RunStartNs, s.RunDurNs, s.Count} {
			b = binary.LittleEndian.AppendUint64(b, uint64(v))
		}
	}
	return b
}

var errShort = errors.New("timeline record cut short")

// Decode reads a record Encode made.
func Decode(b []byte) (RankRecord, error) {
	var rr RankRecord
	if len(b) < len(magic) || string(b[:len(magic)]) != magic {
		return rr, errors.New("not a timeline record")
	}
	d := decoder{b: b[len(magic):]}
	var h [headerWords]int64
	for i := range h {
		h[i] = int64(d.u64())
	}
	rr.WorldRank, rr.CPGroup, rr.CPRank = int(h[0]), int(h[1]), int(h[2])
	rr.Window = Window{Steps: h[3], Every: h[4]}
	rr.SpanCap = int(h[5])
	rr.StepsKept, rr.FirstStep, rr.LastStep, rr.Dropped, rr.StreamEndStep = h[6], h[7], h[8], h[9], h[10]
	names, spans := h[11], h[12]
	if d.err != nil || names < 0 || names > 1<<16 || spans < 0 ||
		spans > int64(len(d.b)/spanBytes) {
		return rr, fmt.Errorf(
			"%w: a header of %d names and %d spans in %d bytes",
			errShort,
			names,
			spans,
			len(b),
		)
	}
	rr.Names = make([]string, names)
	for i := range rr.Names {
		rr.Names[i] = string(d.take(int(d.u16())))
	}
	rr.Spans = make([]Span, spans)
	for i := range rr.Spans {
		s := &rr.Spans[i]
		s.Kind = Kind(d.take(1)[0])
		s.Name = d.u16()
		s.Step, s.StartNs, s.DurNs = int64(d.u64()), int64(d.u64()), int64(d.u64())
		s.RunStartNs, s.RunDurNs, s.Count = int64(d.u64()), int64(d.u64()), int64(d.u64())
		if d.err == nil && (s.Kind == KindNone || s.Kind >= kinds || int(s.Name) >= len(rr.Names)) {
			return rr, fmt.Errorf(
				"timeline record of rank %d: span %d has kind %d and name %d of %d",
				rr.WorldRank,
				i,
				s.Kind,
				s.Name,
				len(rr.Names),
			)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf(
			"timeline record of rank %d: %d bytes after its spans",
			rr.WorldRank,
			len(d.b),
		)
	}
	return rr, d.err
}

// decoder reads little-endian values, remembering the first shortfall (and reading zeros after it).
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil || n > len(d.b) {
		d.err = errShort
		return make([]byte, n)
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u64() uint64 { return binary.LittleEndian.Uint64(d.take(8)) }
func (d *decoder) u16() uint16 { return binary.LittleEndian.Uint16(d.take(2)) }
