package hicache

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// TraceFormatHelp describes the trace format; the CLI prints it in --help.
const TraceFormatHelp = "A trace is JSON Lines, one event a line: " +
	`{"rid": "c0.t0", "input_ids": [1, 2, 3], "output_len": 16} is a request, {"op": "flush"} flushes the cache. ` +
	"rid is a string or an integer; input_ids is a non-empty array of token ids in [0, vocab size); output_len " +
	"is an integer in [0, 1048576] (0 when absent). Blank lines are skipped; any other field is an error."

// Bounds of a trace line. They make ReadTrace's memory proportional to its input, whatever the input.
const (
	// A line of 64 MiB holds some 10 million token ids: far longer than any context window.
	traceLineBytesMax = 64 << 20
	// 2^20 generated tokens is above any model's generation limit; larger is surely a mistake.
	traceOutputLenMax = 1 << 20
	// An error message quotes at most this much of a bad value, so one message stays one readable line.
	traceQuoteBytesMax = 40
)

// TraceError is a bad trace line: the message names the file and the line, as compilers do.
type TraceError struct {
	File   string
	Line   int // 1-based
	Reason string
}

func (e *TraceError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Reason) }

// ReadTraceFile reads the trace at path; see ReadTrace.
func ReadTraceFile(path string, vocabSize int) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *os.PathError names the path
	}
	defer f.Close()
	return ReadTrace(f, path, vocabSize)
}

// ReadTrace parses a JSON Lines trace (TraceFormatHelp) named name in errors. Token ids must lie in
// [0, vocabSize). A trace without requests is an error: a replay of it would test nothing.
func ReadTrace(r io.Reader, name string, vocabSize int) ([]Event, error) {
	return readTrace(r, name, vocabSize, traceLineBytesMax)
}

// readTrace is ReadTrace with the line bound as a parameter, so a test can reach it without 64 MiB lines.
func readTrace(r io.Reader, name string, vocabSize, lineBytesMax int) ([]Event, error) {
	if vocabSize < 1 || vocabSize > vocabSizeMax {
		return nil, fmt.Errorf("trace %s: vocab size %d, want 1..%d", name, vocabSize, vocabSizeMax)
	}
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, min(64<<10, lineBytesMax)), lineBytesMax)
	var events []Event
	requests, line := 0, 0
	for scanner.Scan() {
		line++
		text := bytes.TrimSpace(scanner.Bytes())
		if len(text) == 0 {
			continue
		}
		e, err := parseTraceLine(text, vocabSize)
		if err != nil {
			return nil, &TraceError{File: name, Line: line, Reason: err.Error()}
		}
		if !e.Flush {
			requests++
		}
		events = append(events, e)
	}
	if err := scanner.Err(); errors.Is(err, bufio.ErrTooLong) {
		return nil, &TraceError{File: name, Line: line + 1, Reason: fmt.Sprintf("line longer than %d bytes", lineBytesMax)}
	} else if err != nil {
		return nil, &TraceError{File: name, Line: line + 1, Reason: "read: " + err.Error()}
	}
	if requests == 0 {
		return nil, fmt.Errorf("trace %s holds no requests", name)
	}
	return events, nil
}

// traceLine holds a line's fields as raw JSON, each checked and converted once every field is read.
type traceLine struct {
	op, rid, inputIDs, outputLen json.RawMessage
}

// parseTraceLine parses one non-blank line. It walks the object's keys itself, rather than unmarshalling into a
// struct, because encoding/json matches field names case-insensitively and lets a duplicate key win silently:
// a mistyped or repeated field must be an error here.
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

func splitTraceFields(text []byte) (traceLine, error) {
	var fields traceLine
	dec := json.NewDecoder(bytes.NewReader(text))
	if tok, err := dec.Token(); err != nil {
		return fields, notJSON(err)
	} else if tok != json.Delim('{') {
		return fields, errors.New("not a JSON object")
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fields, notJSON(err)
		}
		key, _ := tok.(string) // inside an object, the decoder yields only string keys here
		slot := fields.slot(key)
		if slot == nil {
			return fields, fmt.Errorf("unknown field %s (want rid, input_ids, output_len or op)", quoteTrimmed(key))
		}
		if *slot != nil {
			return fields, fmt.Errorf("duplicate field %s", quoteTrimmed(key))
		}
		if err := dec.Decode(slot); err != nil {
			return fields, notJSON(err)
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return fields, notJSON(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return fields, errors.New("not JSON: data after the object")
	}
	return fields, nil
}

// notJSON words a decoder error for a trace line: the decoder reports a line cut short as an unexpected EOF.
func notJSON(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("not JSON: the line ends inside the object")
	}
	return fmt.Errorf("not JSON: %v", err)
}

func (l *traceLine) slot(key string) *json.RawMessage {
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
	var op string
	if err := json.Unmarshal(fields.op, &op); err != nil || op != "flush" {
		return Event{}, fmt.Errorf("unknown op %s (want \"flush\")", excerpt(fields.op))
	}
	if fields.rid != nil || fields.inputIDs != nil || fields.outputLen != nil {
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

// parseRID accepts a non-empty string or an integer, which it keeps as written ("rid": 17 is rid "17").
func parseRID(raw json.RawMessage) (string, error) {
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

func parseOutputLen(raw json.RawMessage) (int32, error) {
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

// isJSONInteger reports whether raw, already valid JSON, is an integer literal: -?[0-9]+.
func isJSONInteger(raw []byte) bool {
	digits := bytes.TrimPrefix(raw, []byte("-"))
	if len(digits) == 0 {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// parseInputIDs parses a JSON array of token ids. It scans the bytes itself: a trace holds millions of ids, and
// decoding each through encoding/json's reflection costs several times more. raw is valid JSON already.
func parseInputIDs(raw json.RawMessage, vocabSize int) ([]int32, error) {
	if raw == nil {
		return nil, errors.New("missing input_ids")
	}
	if raw[0] != '[' {
		return nil, fmt.Errorf("input_ids %s is not an array", excerpt(raw))
	}
	body := bytes.TrimSpace(raw[1 : len(raw)-1])
	if len(body) == 0 {
		return nil, errors.New("empty input_ids")
	}
	ids := make([]int32, 0, bytes.Count(body, []byte(","))+1)
	for len(body) > 0 {
		element, rest, _ := bytes.Cut(body, []byte(","))
		id, err := parseTokenID(bytes.TrimSpace(element), vocabSize)
		if err != nil {
			return nil, fmt.Errorf("input_ids[%d]: %v", len(ids), err)
		}
		ids = append(ids, id)
		body = rest
	}
	return ids, nil
}

// parseTokenID parses one array element; a string element may hold a comma, but it fails as "not an integer"
// on its first piece anyway.
func parseTokenID(element []byte, vocabSize int) (int32, error) {
	if !isJSONInteger(element) {
		return 0, fmt.Errorf("%s is not an integer token id", excerpt(element))
	}
	if element[0] == '-' {
		if len(bytes.Trim(element, "-0")) == 0 {
			return 0, nil // -0
		}
		return 0, tokenOutOfRange(element, vocabSize)
	}
	var id int64
	for _, c := range element {
		id = id*10 + int64(c-'0')
		if id >= int64(vocabSize) { // checked every digit, so id never overflows
			return 0, tokenOutOfRange(element, vocabSize)
		}
	}
	return int32(id), nil
}

func tokenOutOfRange(element []byte, vocabSize int) error {
	return fmt.Errorf("token id %s outside [0, %d)", excerpt(element), vocabSize)
}

// quoteTrimmed returns s quoted, cut to traceQuoteBytesMax bytes, so an error stays one short line.
func quoteTrimmed(s string) string {
	if len(s) <= traceQuoteBytesMax {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:traceQuoteBytesMax]) + "..."
}

// excerpt returns raw JSON text cut to traceQuoteBytesMax bytes: it is quoted already where it is a string.
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
