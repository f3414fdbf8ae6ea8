package workload

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
)

// The events' broadcast form: it round-trips, and every truncation, bit flip or bad structure is
// refused.

// Edge values: empty rid, no tokens, negative int32s (not from a trace, but the encoding must not
// care).
var encodingEdgeEvents = []Event{
	{Flush: true},
	{Request: Request{RID: "", InputIDs: nil, OutputLen: 0}},
	{
		Request: Request{
			RID:       "c1.t0",
			InputIDs:  []int32{0, 1, 127, 128, 1<<31 - 1, -1, -1 << 31},
			OutputLen: -5,
		},
	},
	{Flush: true},
	{Request: Request{RID: "ü\x00.x", InputIDs: []int32{3}, OutputLen: 1<<31 - 1}},
}

func TestEncodeDecodeEventsRoundTrip(t *testing.T) {
	for name, events := range map[string][]Event{
		"empty":   {},
		"edges":   encodingEdgeEvents,
		"default": mustGenerate(t, DefaultSyntheticConfig()),
	} {
		got, err := DecodeEvents(EncodeEvents(events))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !eventsEqual(got, events) {
			t.Fatalf("%s: %s", name, firstDifference(got, events))
		}
	}
}

func TestDecodeEventsRejectsEveryTruncation(t *testing.T) {
	buf := EncodeEvents(encodingEdgeEvents)
	for n := range len(buf) {
		if _, err := DecodeEvents(buf[:n]); !errors.Is(err, errEventsCorrupt) {
			t.Fatalf("%d of %d bytes: error %v, want a corrupt-buffer error", n, len(buf), err)
		}
	}
}

func TestDecodeEventsRejectsEveryBitFlip(t *testing.T) {
	buf := EncodeEvents(encodingEdgeEvents)
	for bit := range 8 * len(buf) {
		flipped := slices.Clone(buf)
		flipped[bit/8] ^= 1 << (bit % 8)
		if _, err := DecodeEvents(flipped); !errors.Is(err, errEventsCorrupt) {
			t.Fatalf("bit %d flipped: error %v, want a corrupt-buffer error", bit, err)
		}
	}
}

// withChecksum appends a valid checksum, so a test reaches the structural checks behind it.
func withChecksum(body []byte) []byte {
	return binary.LittleEndian.AppendUint32(slices.Clone(body), crc32.Checksum(body, castagnoli))
}

func TestDecodeEventsRejectsStructuralCorruption(t *testing.T) {
	valid := EncodeEvents(encodingEdgeEvents)
	body := valid[:len(valid)-eventsTrailerSize]
	for _, tc := range []struct {
		name, want string
		body       []byte
	}{
		{"bad magic", "magic", append([]byte("HCE2"), body[4:]...)},
		{"count beyond the buffer", "event count", []byte("HCE1\xff\xff\xff\xff\x0f\x01")},
		{"unknown kind", "event kind 7", []byte("HCE1\x01\x07")},
		{"rid beyond the buffer", "rid length", []byte("HCE1\x01\x00\x09ab")},
		{"ids beyond the buffer", "input_ids length", []byte("HCE1\x01\x00\x00\x00\x05\x01\x02")},
		{"token id over 32 bits", "does not fit 32 bits", []byte("HCE1\x01\x00\x00\x00\x01\x80\x80\x80\x80\x10")},
		{"overlong varint", "varint", []byte("HCE1\x01\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")},
		{"trailing bytes", "after the last event", append(slices.Clone(body), 0)},
		{"missing event", "truncated", []byte("HCE1\x02\x00\x00\x00\x00")},
	} {
		_, err := DecodeEvents(withChecksum(tc.body))
		if !errors.Is(err, errEventsCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func FuzzDecodeEvents(f *testing.F) {
	f.Add(EncodeEvents(encodingEdgeEvents))
	f.Add(EncodeEvents(nil))
	f.Add(EncodeEvents(compactEdgeEvents))
	f.Add(withChecksum([]byte("HCE1\x01\x00\x01a\x02\x02\x05\x06")))
	f.Fuzz(func(t *testing.T, buf []byte) {
		events, err := DecodeEvents(buf)
		if err != nil {
			return
		}
		again, err := DecodeEvents(EncodeEvents(events))
		if err != nil || !eventsEqual(again, events) {
			t.Fatalf("decoded events do not round-trip: %v", err)
		}
	})
}

func BenchmarkEncodeEventsDefault(b *testing.B) {
	events := mustGenerate(b, DefaultSyntheticConfig())
	b.SetBytes(int64(len(EncodeEvents(events))))
	for b.Loop() {
		EncodeEvents(events)
	}
}

func BenchmarkDecodeEventsDefault(b *testing.B) {
	buf := EncodeEvents(mustGenerate(b, DefaultSyntheticConfig()))
	b.SetBytes(int64(len(buf)))
	for b.Loop() {
		if _, err := DecodeEvents(buf); err != nil {
			b.Fatal(err)
		}
	}
}
