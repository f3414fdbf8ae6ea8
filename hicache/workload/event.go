package workload

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

// Request is one inference request: its prompt tokens and how many tokens it will generate. A
// request of a Mooncake trace arrives compact (Blocks set, InputIDs nil): it travels so in the step
// broadcast, and every rank expands it after decoding (ExpandEvents), so its tokens never exist as
// a whole trace.
type Request struct {
	RID       string
	InputIDs  []int32
	OutputLen int32
	Blocks    BlockPrompt // the compact form; zero for a request given by its tokens
	// ArrivalNs is when the request arrives, in nanoseconds of the workload's own clock (a Mooncake
	// trace's timestamp, or a --request-rate's arrivals): the serving clock's input on CP rank 0,
	// which forms the steps. It does not travel in the step broadcast: no other rank decides
	// anything from it.
	ArrivalNs int64
}

// PromptTokens is the request's prompt length, in its compact form or its tokens.
func (r *Request) PromptTokens() int64 {
	if r.Blocks.Compact() {
		return int64(r.Blocks.InputTokens)
	}
	return int64(len(r.InputIDs))
}

// Event is one line of a workload: a request, or a flush of the whole cache.
type Event struct {
	Flush   bool
	Request Request // zero when Flush is set
}

// TakeBatch pops the next step's events: a flush alone, or up to max requests stopping before a
// flush.
func TakeBatch(events *[]Event, max int) []Event {
	ev := *events
	if len(ev) == 0 {
		return nil
	}
	if ev[0].Flush {
		*events = ev[1:]
		return ev[:1]
	}
	n := 0
	for n < len(ev) && n < max && !ev[n].Flush {
		n++
	}
	*events = ev[n:]
	return ev[:n]
}

// The broadcast form of a run of events, all integers unsigned varints (encoding/binary):
//
//	magic "HCE1" | count | count events | CRC-32C (little-endian) of everything before it
//	event: 0 = request | len(rid) | rid bytes | uint32(output_len) | len(input_ids) | uint32(id) per id
//	       1 = flush
//	       2 = compact request | len(rid) | rid bytes | uint32(output_len) | input_tokens | block_tokens |
//	           len(hash_ids) | id per id (64 bits)
//
// The checksum makes a corrupt or mismatched buffer an error rather than a silently different event
// stream, which would break the ranks' replicated determinism.
const (
	eventsMagic       = "HCE1"
	eventKindRequest  = 0
	eventKindFlush    = 1
	eventKindBlocks   = 2
	eventsTrailerSize = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeEvents returns the compact binary form of events, for broadcasting a step over MPI.
func EncodeEvents(events []Event) []byte {
	buf := make([]byte, 0, encodedSizeEstimate(events))
	buf = append(buf, eventsMagic...)
	buf = binary.AppendUvarint(buf, uint64(len(events)))
	for _, e := range events {
		if e.Flush {
			buf = append(buf, eventKindFlush)
			continue
		}
		buf = appendRequest(buf, &e.Request)
	}
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// appendRequest encodes a request in its compact form when it has one: its tokens, if already
// expanded, are recomputed from it on every rank.
func appendRequest(buf []byte, r *Request) []byte {
	kind := byte(eventKindRequest)
	if r.Blocks.Compact() {
		kind = eventKindBlocks
	}
	buf = append(buf, kind)
	buf = binary.AppendUvarint(buf, uint64(len(r.RID)))
	buf = append(buf, r.RID...)
	buf = binary.AppendUvarint(buf, uint64(uint32(r.OutputLen)))
	if kind == eventKindBlocks {
		b := &r.Blocks
		buf = binary.AppendUvarint(buf, uint64(uint32(b.InputTokens)))
		buf = binary.AppendUvarint(buf, uint64(uint32(b.BlockTokens)))
		buf = binary.AppendUvarint(buf, uint64(len(b.HashIDs)))
		for _, id := range b.HashIDs {
			buf = binary.AppendUvarint(buf, id)
		}
		return buf
	}
	buf = binary.AppendUvarint(buf, uint64(len(r.InputIDs)))
	for _, id := range r.InputIDs {
		buf = binary.AppendUvarint(buf, uint64(uint32(id)))
	}
	return buf
}

// encodedSizeEstimate assumes 3-byte token ids (vocabularies up to 2^21): one allocation in the
// common case.
func encodedSizeEstimate(events []Event) int {
	size := len(eventsMagic) + binary.MaxVarintLen64 + eventsTrailerSize
	for _, e := range events {
		size += 1 + 5*binary.MaxVarintLen32 + len(
			e.Request.RID,
		) + 3*len(
			e.Request.InputIDs,
		) + 4*len(
			e.Request.Blocks.HashIDs,
		)
	}
	return size
}

// errEventsCorrupt is wrapped by every DecodeEvents error.
var errEventsCorrupt = errors.New("corrupt event buffer")

// DecodeEvents is the inverse of EncodeEvents. A truncated or corrupt buffer is an error; counts
// are checked against the bytes left before anything is allocated, so no input makes it allocate
// more than len(buf) words.
func DecodeEvents(buf []byte) ([]Event, error) {
	minSize := len(eventsMagic) + 1 + eventsTrailerSize
	if len(buf) < minSize {
		return nil, fmt.Errorf(
			"%w: %d bytes, want at least %d",
			errEventsCorrupt,
			len(buf),
			minSize,
		)
	}
	body, trailer := buf[:len(buf)-eventsTrailerSize], buf[len(buf)-eventsTrailerSize:]
	if want, got := binary.LittleEndian.Uint32(trailer), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", errEventsCorrupt, got, want)
	}
	if string(body[:len(eventsMagic)]) != eventsMagic {
		return nil, fmt.Errorf(
			"%w: magic %q, want %q",
			errEventsCorrupt,
			body[:len(eventsMagic)],
			eventsMagic,
		)
	}
	d := eventDecoder{buf: body[len(eventsMagic):]}
	count := d.count("event count", 1)
	events := make([]Event, 0, count)
	for i := uint64(0); i < count && d.err == nil; i++ {
		events = append(events, d.event())
	}
	if d.err == nil && len(d.buf) != 0 {
		d.fail("%d bytes after the last event", len(d.buf))
	}
	if d.err != nil {
		return nil, d.err
	}
	return events, nil
}

// eventDecoder reads the event encoding; after the first error every read returns zero and err
// keeps it.
type eventDecoder struct {
	buf []byte
	err error
}

func (d *eventDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", errEventsCorrupt, fmt.Sprintf(format, args...))
	}
}

func (d *eventDecoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.buf)
	if n <= 0 {
		d.fail("%s: truncated or overlong varint", what)
		return 0
	}
	d.buf = d.buf[n:]
	return v
}

// count reads a length whose items each take at least itemBytesMin bytes, and rejects one the
// buffer cannot hold.
func (d *eventDecoder) count(what string, itemBytesMin uint64) uint64 {
	n := d.uvarint(what)
	if d.err == nil && n > uint64(len(d.buf))/itemBytesMin {
		d.fail("%s %d, but %d bytes left", what, n, len(d.buf))
		return 0
	}
	return n
}

func (d *eventDecoder) uint32(what string) uint32 {
	v := d.uvarint(what)
	if d.err == nil && v > 1<<32-1 {
		d.fail("%s %d does not fit 32 bits", what, v)
	}
	return uint32(v)
}

func (d *eventDecoder) event() Event {
	if d.err != nil || len(d.buf) == 0 {
		d.fail("truncated before an event")
		return Event{}
	}
	kind := d.buf[0]
	d.buf = d.buf[1:]
	switch kind {
	case eventKindFlush:
		return Event{Flush: true}
	case eventKindRequest:
		return Event{Request: d.request()}
	case eventKindBlocks:
		return Event{Request: d.compactRequest()}
	default:
		d.fail("event kind %d", kind)
		return Event{}
	}
}

// ridAndOutputLen reads the two fields every request kind starts with.
func (d *eventDecoder) ridAndOutputLen(r *Request) {
	ridBytes := d.count("rid length", 1)
	if d.err != nil {
		return
	}
	r.RID = string(d.buf[:ridBytes])
	d.buf = d.buf[ridBytes:]
	r.OutputLen = int32(d.uint32("output_len"))
}

func (d *eventDecoder) request() Request {
	var r Request
	d.ridAndOutputLen(&r)
	tokens := d.count("input_ids length", 1)
	if d.err != nil || tokens == 0 {
		return r
	}
	r.InputIDs = make([]int32, tokens)
	for i := range r.InputIDs {
		r.InputIDs[i] = int32(d.uint32("token id"))
	}
	return r
}

// compactRequest reads a kind-2 request and checks its block chain as the trace reader does
// (BlockPrompt.check), so no buffer can make a rank expand a prompt the reader would have refused.
func (d *eventDecoder) compactRequest() Request {
	var r Request
	d.ridAndOutputLen(&r)
	b := &r.Blocks
	b.InputTokens = int32(d.uint32("input_tokens"))
	b.BlockTokens = int32(d.uint32("block_tokens"))
	ids := d.count("hash_ids length", 1)
	if d.err != nil {
		return r
	}
	b.HashIDs = make([]uint64, ids)
	for i := range b.HashIDs {
		b.HashIDs[i] = d.uvarint("hash id")
	}
	if err := b.check(); d.err == nil && err != nil {
		d.fail("compact request: %v", err)
	}
	return r
}

// Tokens is the request's prompt length, in either form.
func (r *Request) Tokens() int {
	if r.Blocks.Compact() {
		return int(r.Blocks.InputTokens)
	}
	return len(r.InputIDs)
}

// LongestRequestTokens is the longest prompt of events, in tokens (0 without a request).
func LongestRequestTokens(events []Event) int {
	longest := 0
	for i := range events {
		if !events[i].Flush {
			longest = max(longest, events[i].Request.Tokens())
		}
	}
	return longest
}
