package workload

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// MooncakeFormatHelp describes the second trace format; the CLI prints it in --help.
const MooncakeFormatHelp = "A Mooncake trace (FAST'25 release) is JSON Lines, one request a line: " +
	`{"timestamp": 0, "input_length": 1300, "output_length": 16, "hash_ids": [0, 1, 2]}, every field required; ` +
	"timestamp (ms) is an integer in [0, 2^43], the request's arrival on the serving clock (--gpu or --prefill-profile; " +
	"without one, requests replay in line order and timestamps are checked but unused); input_length is in " +
	"[1, 16777216], output_length in [0, 1048576]; hash_ids holds ceil(input_length / --trace-block-tokens) ids in " +
	"[0, 2^63). Block h's tokens are a pure function of h, and a request's last block holds its first " +
	"input_length - block*(n-1) tokens. {\"op\": \"flush\"} lines flush the cache. A request's rid is its line number, " +
	"so DP replicas share a Mooncake trace request by request (the rule below), not by conversation."

// timestampMsMax bounds a Mooncake timestamp so that its nanoseconds fit an int64 (2^43 ms is about
// 278 years).
const timestampMsMax = 1 << 43

// TraceFormat is a trace's line format.
type TraceFormat int

const (
	TraceAuto   TraceFormat = iota // decided by the first request line (detectTraceFormat)
	TraceTokens                    // {"rid", "input_ids", "output_len"} (TraceFormatHelp)
	// {"timestamp", "input_length", "output_length", "hash_ids"} (MooncakeFormatHelp)
	TraceMooncake
)

var traceFormatNames = []string{TraceAuto: "auto", TraceTokens: "tokens", TraceMooncake: "mooncake"}

func (f TraceFormat) String() string { return traceFormatNames[f] }

// ParseTraceFormat reads auto, tokens or mooncake.
func ParseTraceFormat(s string) (TraceFormat, error) {
	for f, name := range traceFormatNames {
		if s == name {
			return TraceFormat(f), nil
		}
	}
	return TraceAuto, fmt.Errorf("%q is not one of auto, tokens, mooncake", s)
}

// TraceOptions say how to read a trace.
type TraceOptions struct {
	Format        TraceFormat
	VocabSize     int // token ids in [0, VocabSize)
	BlockTokens   int // tokens per Mooncake block
	LimitRequests int // read up to this many requests, and no line after the last; 0 = all
}

func (o *TraceOptions) check(name string) error {
	if o.VocabSize < 1 || o.VocabSize > vocabSizeMax {
		return fmt.Errorf("trace %s: vocab size %d, want 1..%d", name, o.VocabSize, vocabSizeMax)
	}
	if o.Format != TraceTokens && (o.BlockTokens < 1 || o.BlockTokens > BlockTokensMax) {
		return fmt.Errorf(
			"trace %s: block tokens %d, want 1..%d",
			name,
			o.BlockTokens,
			BlockTokensMax,
		)
	}
	if o.LimitRequests < 0 {
		return fmt.Errorf("trace %s: request limit %d is negative", name, o.LimitRequests)
	}
	return nil
}

func (o *TraceOptions) parseLine(text []byte, line int) (Event, error) {
	if o.Format == TraceMooncake {
		return parseMooncakeLine(text, line, o.BlockTokens)
	}
	return parseTraceLine(text, o.VocabSize)
}

// detectTraceFormat decides a trace's format from one line: Mooncake when it names a Mooncake
// field, tokens when it names a token-format field, undecided (TraceAuto) otherwise (a flush, or a
// line too broken to tell, which the token parser then reports).
func detectTraceFormat(text []byte) TraceFormat {
	var keys keyCollector
	_ = splitFields(text, &keys) // a broken line is reported by the parser it goes to
	for _, k := range keys.keys {
		var m mooncakeLine
		var t traceLine
		switch {
		case m.slot(k) != nil && k != "op":
			return TraceMooncake
		case t.slot(k) != nil && k != "op":
			return TraceTokens
		}
	}
	return TraceAuto
}

// keyCollector takes every field, keeping the names.
type keyCollector struct {
	keys []string
	raw  []byte
}

func (k *keyCollector) slot(key string) *[]byte {
	k.keys = append(k.keys, key)
	k.raw = nil
	return &k.raw
}

func (k *keyCollector) names() string { return "" }

// mooncakeLine holds a Mooncake line's fields as raw JSON text.
type mooncakeLine struct {
	op, timestamp, inputLength, outputLength, hashIDs []byte
}

func (l *mooncakeLine) names() string {
	return "timestamp, input_length, output_length, hash_ids or op"
}

func (l *mooncakeLine) slot(key string) *[]byte {
	switch key {
	case "op":
		return &l.op
	case "timestamp":
		return &l.timestamp
	case "input_length":
		return &l.inputLength
	case "output_length":
		return &l.outputLength
	case "hash_ids":
		return &l.hashIDs
	}
	return nil
}

// parseMooncakeLine parses one non-blank Mooncake line; line (1-based) becomes the request's rid.
func parseMooncakeLine(text []byte, line, blockTokens int) (Event, error) {
	var f mooncakeLine
	if err := splitFields(text, &f); err != nil {
		return Event{}, err
	}
	if f.op != nil {
		return parseFlush(
			f.op,
			f.timestamp != nil || f.inputLength != nil || f.outputLength != nil || f.hashIDs != nil,
		)
	}
	timestampMs, err := parseBoundedInt("timestamp", f.timestamp, 0, timestampMsMax)
	if err != nil {
		return Event{}, err
	}
	inputTokens, err := parseBoundedInt("input_length", f.inputLength, 1, traceInputTokensMax)
	if err != nil {
		return Event{}, err
	}
	outputLen, err := parseBoundedInt("output_length", f.outputLength, 0, traceOutputLenMax)
	if err != nil {
		return Event{}, err
	}
	ids, err := parseHashIDs(f.hashIDs)
	if err != nil {
		return Event{}, err
	}
	b := BlockPrompt{HashIDs: ids, InputTokens: int32(inputTokens), BlockTokens: int32(blockTokens)}
	if err := b.check(); err != nil {
		return Event{}, fmt.Errorf("%v (--trace-block-tokens %d)", err, blockTokens)
	}
	return Event{
		Request: Request{
			RID:       strconv.Itoa(line),
			OutputLen: int32(outputLen),
			Blocks:    b,
			ArrivalNs: timestampMs * 1e6,
		},
	}, nil
}

// parseBoundedInt reads a required JSON integer field in [lo, hi].
func parseBoundedInt(name string, raw []byte, lo, hi int64) (int64, error) {
	if raw == nil {
		return 0, fmt.Errorf("missing %s", name)
	}
	if !isJSONInteger(raw) {
		return 0, fmt.Errorf("%s %s is not an integer", name, excerpt(raw))
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("%s %s outside [%d, %d]", name, excerpt(raw), lo, hi)
	}
	return n, nil
}

// parseHashIDs parses a JSON array of ids in [0, 2^63).
func parseHashIDs(raw []byte) ([]uint64, error) {
	if raw == nil {
		return nil, errors.New("missing hash_ids")
	}
	if raw[0] != '[' {
		return nil, fmt.Errorf("hash_ids %s is not an array", excerpt(raw))
	}
	body := raw[1 : len(raw)-1] // value() ends a bracketed value at its closing bracket
	s := jsonScan{text: body}
	if s.skipSpace(); s.pos == len(body) {
		return nil, errors.New("empty hash_ids")
	}
	ids := make([]uint64, 0, bytes.Count(body, []byte(","))+1)
	for {
		s.skipSpace()
		element := s.element(s.pos)
		s.pos += len(element)
		id, err := strconv.ParseUint(string(element), 10, 63)
		if err != nil || !isJSONInteger(element) {
			return nil, fmt.Errorf(
				"hash_ids[%d]: %s is not an id (an integer in [0, 2^63))",
				len(ids),
				excerptOr(element, "nothing"),
			)
		}
		ids = append(ids, id)
		if s.skipSpace(); s.pos == len(body) {
			return ids, nil
		}
		if body[s.pos] != ',' {
			return nil, fmt.Errorf(
				"hash_ids[%d]: want ',' before %s",
				len(ids),
				excerpt(s.element(s.pos)),
			)
		}
		s.pos++
	}
}

// excerptOr is excerpt, or what when raw is empty (a stray comma).
func excerptOr(raw []byte, what string) string {
	if len(raw) == 0 {
		return what
	}
	return excerpt(raw)
}
