package workload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// TraceFormatHelp describes the trace format; the CLI prints it in --help.
const TraceFormatHelp = "A trace is JSON Lines, one event a line: " +
	`{"rid": "c0.t0", "input_ids": [1, 2, 3], "output_len": 16} is a request, {"op": "flush"} flushes the cache. ` +
	"rid is a string or an integer; input_ids is a non-empty array of token ids in [0, vocab size); output_len " +
	"is an integer in [0, 1048576] (0 when absent). Blank lines are skipped; a line may hold up to 64 MiB; any " +
	"other field is an error, and an error names the file and line (trace.jsonl:17: ...)."

// Bounds of a trace line. They make ReadTrace's memory proportional to its input, whatever the
// input.
const (
	// A line of 64 MiB holds some 10 million token ids: far longer than any context window.
	traceLineBytesMax = 64 << 20
	// 2^20 generated tokens is above any model's generation limit; larger is surely a mistake.
	traceOutputLenMax = 1 << 20
	// An error message quotes at most this much of a bad value, so one message stays one readable
	// line.
	traceQuoteBytesMax = 40
)

// TraceError is a bad trace line: the message names the file and the line, as compilers do.
type TraceError struct {
	File   string
	Line   int // 1-based
	Reason string
}

func (e *TraceError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason) }

// ReadTrace parses a JSON Lines trace of the token format (TraceFormatHelp) named name in errors.
// Token ids must lie in [0, vocabSize). A trace without requests is an error: a replay of it would
// test nothing.
func ReadTrace(r io.Reader, name string, vocabSize int) ([]Event, error) {
	return readTrace(
		r,
		name,
		TraceOptions{Format: TraceTokens, VocabSize: vocabSize},
		traceLineBytesMax,
	)
}

// ReadTraceAs parses a trace of either format (TraceOptions).
func ReadTraceAs(r io.Reader, name string, o TraceOptions) ([]Event, error) {
	return readTrace(r, name, o, traceLineBytesMax)
}

// readTrace is ReadTraceAs with the line bound as a parameter, so a test can reach it without 64
// MiB lines.
func readTrace(r io.Reader, name string, o TraceOptions, lineBytesMax int) ([]Event, error) {
	if err := o.check(name); err != nil {
		return nil, err
	}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, min(64<<10, lineBytesMax)), lineBytesMax)
	var events []Event
	requests, line := 0, 0
	for (o.LimitRequests == 0 || requests < o.LimitRequests) && scanner.Scan() {
		line++
		text := bytes.Trim(scanner.Bytes(), jsonSpaces)
		if len(text) == 0 {
			continue
		}
		if o.Format == TraceAuto {
			o.Format = detectTraceFormat(
				text,
			) // stays TraceAuto on a flush line, which both formats read alike
		}
		e, err := o.parseLine(text, line)
		if err != nil {
			return nil, &TraceError{File: name, Line: line, Reason: err.Error()}
		}
		if !e.Flush {
			requests++
		}
		events = append(events, e)
	}
	if err := scanner.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, &TraceError{
			File:   name,
			Line:   line + 1,
			Reason: fmt.Sprintf("line longer than %d bytes", lineBytesMax),
		}
	} else if err != nil {
		return nil, &TraceError{File: name, Line: line + 1, Reason: "read: " + err.Error()}
	}
	if requests == 0 {
		return nil, fmt.Errorf("trace %s holds no requests", name)
	}
	return events, nil
}

// traceLine holds a line's fields as raw JSON text (sub-slices of the line), each checked and
// converted once every field is read.
type traceLine struct {
	op, rid, inputIDs, outputLen []byte
}

// parseTraceLine parses one non-blank line.
func parseTraceLine(text []byte, vocabSize int) (Event, error) {
	fields, err := splitTraceFields(text)
	if err != nil {
		return Event{}, err
	}
	if fields.op != nil {
		return parseTraceOp(fields)
	}
	return parseTraceRequest(fields, vocabSize)
}

// splitTraceFields splits a line's JSON object into its fields' raw values. It scans the object
// itself rather than use encoding/json, for three reasons: encoding/json matches field names
// case-insensitively and lets a duplicate key win silently, where a mistyped or repeated field must
// be an error; it scans a value twice; and a trace holds millions of token ids. The scan only finds
// where each value ends: the field parsers then accept only a JSON string, a JSON integer or an
// array of JSON integers, so whatever is accepted is valid JSON (FuzzReadTrace checks this against
// encoding/json).
func splitTraceFields(text []byte) (traceLine, error) {
	var fields traceLine
	return fields, splitFields(text, &fields)
}

// lineFields is a line format's fields: slot is where a field's raw value goes, nil for an unknown
// field.
type lineFields interface {
	slot(key string) *[]byte
	names() string // the fields, for the unknown-field message
}

// splitFields scans one JSON object into fields (see splitTraceFields for why it scans by itself).
func splitFields(text []byte, fields lineFields) error {
	s := jsonScan{text: text}
	if !s.consume('{') {
		return errors.New("not a JSON object")
	}
	for first := true; !s.consume('}'); first = false {
		if !first && !s.consume(',') {
			return s.notJSON("want ',' or '}'")
		}
		key, err := s.key()
		if err != nil {
			return err
		}
		slot := fields.slot(key)
		if slot == nil {
			return fmt.Errorf("unknown field %s (want %s)", quoteTrimmed(key), fields.names())
		}
		if *slot != nil {
			return fmt.Errorf("duplicate field %s", quoteTrimmed(key))
		}
		if *slot, err = s.value(); err != nil {
			return err
		}
	}
	if s.skipSpace(); s.pos != len(s.text) {
		return s.notJSON("data after the object")
	}
	return nil
}

func (l *traceLine) names() string { return "rid, input_ids, output_len or op" }

func (l *traceLine) slot(key string) *[]byte {
	switch key {
	case "op":
		return &l.op
	case "rid":
		return &l.rid
	case "input_ids":
		return &l.inputIDs
	case "output_len":
		return &l.outputLen
	}
	return nil
}

func parseTraceOp(fields traceLine) (Event, error) {
	return parseFlush(
		fields.op,
		fields.rid != nil || fields.inputIDs != nil || fields.outputLen != nil,
	)
}

// parseFlush reads an op line of either format: {"op": "flush"} and nothing else.
func parseFlush(op []byte, otherFields bool) (Event, error) {
	var name string
	if err := json.Unmarshal(op, &name); err != nil || name != "flush" {
		return Event{}, fmt.Errorf("unknown op %s (want \"flush\")", excerpt(op))
	}
	if otherFields {
		return Event{}, errors.New(`a {"op": "flush"} line takes no other field`)
	}
	return Event{Flush: true}, nil
}

func parseTraceRequest(fields traceLine, vocabSize int) (Event, error) {
	rid, err := parseRID(fields.rid)
	if err != nil {
		return Event{}, err
	}
	outputLen, err := parseOutputLen(fields.outputLen)
	if err != nil {
		return Event{}, err
	}
	inputIDs, err := parseInputIDs(fields.inputIDs, vocabSize)
	if err != nil {
		return Event{}, err
	}
	return Event{Request: Request{RID: rid, InputIDs: inputIDs, OutputLen: outputLen}}, nil
}

// parseRID accepts a non-empty string or an integer, which it keeps as written ("rid": 17 is rid
// "17").
func parseRID(raw []byte) (string, error) {
	if raw == nil {
		return "", errors.New("missing rid")
	}
	if raw[0] == '"' {
		var rid string
		if err := json.Unmarshal(raw, &rid); err != nil {
			return "", fmt.Errorf("rid: %v", err)
		}
		if rid == "" {
			return "", errors.New("empty rid")
		}
		return rid, nil
	}
	if !isJSONInteger(raw) {
		return "", fmt.Errorf("rid %s is neither a string nor an integer", excerpt(raw))
	}
	return string(raw), nil
}

func parseOutputLen(raw []byte) (int32, error) {
	if raw == nil {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) || !isJSONInteger(raw) {
		return 0, fmt.Errorf("output_len %s is not an integer", excerpt(raw))
	}
	if err != nil || n < 0 || n > traceOutputLenMax {
		return 0, fmt.Errorf("output_len %s outside [0, %d]", excerpt(raw), traceOutputLenMax)
	}
	return int32(n), nil
}

// isJSONInteger reports whether raw is a JSON integer literal: -?(0|[1-9][0-9]*).
func isJSONInteger(raw []byte) bool {
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 || len(digits) > 1 && digits[0] == '0' {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseInputIDs parses a JSON array of token ids in one pass over its bytes. Every element must be
// an integer, so the first ']' after an element is the array's end, and the brackets jsonScan.value
// found are the array's own.
func parseInputIDs(raw []byte, vocabSize int) ([]int32, error) {
	if raw == nil {
		return nil, errors.New("missing input_ids")
	}
	if raw[0] != '[' {
		return nil, fmt.Errorf("input_ids %s is not an array", excerpt(raw))
	}
	body := raw[1 : len(raw)-1] // value() ends a bracketed value at its closing bracket
	s := jsonScan{text: body}
	if s.skipSpace(); s.pos == len(body) {
		return nil, errors.New("empty input_ids")
	}
	ids := make([]int32, 0, bytes.Count(body, []byte(","))+1)
	for {
		id, err := s.tokenID(vocabSize)
		if err != nil {
			return nil, fmt.Errorf("input_ids[%d]: %v", len(ids), err)
		}
		ids = append(ids, id)
		if s.skipSpace(); s.pos == len(body) {
			return ids, nil
		}
		if body[s.pos] != ',' {
			return nil, fmt.Errorf(
				"input_ids[%d]: want ',' before %s",
				len(ids),
				excerpt(s.element(s.pos)),
			)
		}
		s.pos++
	}
}

// tokenID parses the array element at pos, after whitespace, as a JSON integer in [0, vocabSize).
func (s *jsonScan) tokenID(vocabSize int) (int32, error) {
	s.skipSpace()
	start := s.pos
	negative := s.pos < len(s.text) && s.text[s.pos] == '-'
	if negative {
		s.pos++
	}
	digitsStart := s.pos
	var id int64
	for ; s.pos < len(s.text) && s.text[s.pos] >= '0' && s.text[s.pos] <= '9'; s.pos++ {
		// Saturate at vocabSize: the value only matters below it, and saturating cannot overflow.
		id = min(id*10+int64(s.text[s.pos]-'0'), int64(vocabSize))
	}
	digits := s.text[digitsStart:s.pos]
	endsHere := s.pos == len(s.text) || isJSONDelimiter(s.text[s.pos])
	if endsHere && len(digits) > 0 && (len(digits) == 1 || digits[0] != '0') && !negative &&
		id < int64(vocabSize) {
		return int32(id), nil // the common case, decided without finding the element's extent
	}
	element := s.element(start)
	switch {
	case len(element) == 0:
		return 0, errors.New("missing token id (a stray comma?)")
	case len(digits) == 0 || len(digits) > 1 && digits[0] == '0' || !endsHere:
		return 0, fmt.Errorf("%s is not an integer token id", excerpt(element))
	case negative && id == 0:
		return 0, nil // -0 is a JSON integer, and zero
	}
	return 0, fmt.Errorf("token id %s outside [0, %d)", excerpt(element), vocabSize)
}

// element returns the text from start to the next ',', ']' or whitespace: an array element, for
// messages.
func (s *jsonScan) element(start int) []byte {
	end := start
	for end < len(s.text) && !isJSONDelimiter(s.text[end]) {
		end++
	}
	return s.text[start:end]
}

// quoteTrimmed returns s quoted, cut to traceQuoteBytesMax bytes, so an error stays one short line.
func quoteTrimmed(s string) string {
	if len(s) <= traceQuoteBytesMax {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:traceQuoteBytesMax]) + "..."
}

// excerpt returns raw JSON text cut to traceQuoteBytesMax bytes: it is quoted already where it is a
// string.
func excerpt(raw []byte) string {
	if len(raw) <= traceQuoteBytesMax {
		return string(raw)
	}
	return string(raw[:traceQuoteBytesMax]) + "..."
}

// WriteTrace writes events as a JSON Lines trace that ReadTrace reads back to the same events.
func WriteTrace(w io.Writer, events []Event) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	var line []byte
	for _, e := range events {
		line = appendTraceLine(line[:0], e)
		if _, err := bw.Write(line); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func appendTraceLine(line []byte, e Event) []byte {
	if e.Flush {
		return append(line, "{\"op\":\"flush\"}\n"...)
	}
	rid, _ := json.Marshal(e.Request.RID) // a string always marshals
	line = append(line, `{"rid":`...)
	line = append(line, rid...)
	line = append(line, `,"input_ids":[`...)
	for i, id := range e.Request.InputIDs {
		if i > 0 {
			line = append(line, ',')
		}
		line = strconv.AppendInt(line, int64(id), 10)
	}
	line = append(line, `],"output_len":`...)
	line = strconv.AppendInt(line, int64(e.Request.OutputLen), 10)
	return append(line, "}\n"...)
}
