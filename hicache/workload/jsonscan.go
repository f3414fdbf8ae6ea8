package workload

import (
	"encoding/json"
	"errors"
	"fmt"
)

// A small scanner over one JSON object of a trace line: fields are found without decoding the whole
// line, so a line of millions of token ids costs one pass and no per-token allocation.

// jsonScan walks one JSON object; every loop advances pos, so a scan is linear in the line and
// never recurses.
type jsonScan struct {
	text []byte
	pos  int
}

func (s *jsonScan) notJSON(reason string) error {
	if s.pos >= len(s.text) {
		return errors.New("not JSON: the line ends inside the object")
	}
	return fmt.Errorf("not JSON: %s at byte %d", reason, s.pos+1)
}

// skipSpace skips JSON whitespace, which is only these four bytes.
func (s *jsonScan) skipSpace() {
	for s.pos < len(s.text) && isJSONSpace(s.text[s.pos]) {
		s.pos++
	}
}

// jsonSpaces is JSON's whitespace, for bytes.Trim; bytes.TrimSpace would also trim what JSON
// rejects.
const jsonSpaces = " \t\n\r"

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// consume skips whitespace, then c if it is next.
func (s *jsonScan) consume(c byte) bool {
	s.skipSpace()
	if s.pos < len(s.text) && s.text[s.pos] == c {
		s.pos++
		return true
	}
	return false
}

// key reads `"name" :` and returns the name, unescaped.
func (s *jsonScan) key() (string, error) {
	if s.skipSpace(); s.pos >= len(s.text) || s.text[s.pos] != '"' {
		return "", s.notJSON("want a field name")
	}
	raw, err := s.value()
	if err != nil {
		return "", err
	}
	var key string
	if err := json.Unmarshal(raw, &key); err != nil {
		return "", fmt.Errorf("not JSON: field name %s: %v", excerpt(raw), err)
	}
	if !s.consume(':') {
		return "", s.notJSON("want ':' after a field name")
	}
	return key, nil
}

// value returns the raw text of the next value: a string, a bracketed array or object (brackets
// inside its strings do not count), or a literal up to the next delimiter. It finds extents; it
// does not validate.
func (s *jsonScan) value() ([]byte, error) {
	s.skipSpace()
	start := s.pos
	if s.pos >= len(s.text) {
		return nil, s.notJSON("")
	}
	switch s.text[s.pos] {
	case '"':
		if !s.skipString() {
			return nil, s.notJSON("")
		}
	case '[', '{':
		if !s.skipBrackets() {
			return nil, s.notJSON("")
		}
	default:
		for s.pos < len(s.text) && !isJSONDelimiter(s.text[s.pos]) {
			s.pos++
		}
	}
	return s.nonEmpty(start)
}

func isJSONDelimiter(c byte) bool { return c == ',' || c == '}' || c == ']' || isJSONSpace(c) }

// skipBrackets moves past the bracketed value that starts at pos; false when the line ends inside
// it.
func (s *jsonScan) skipBrackets() bool {
	depth := 0
	for s.pos < len(s.text) {
		switch s.text[s.pos] {
		case '"':
			if !s.skipString() {
				return false
			}
			continue
		case '[', '{':
			depth++
		case ']', '}':
			depth--
		}
		s.pos++
		if depth == 0 {
			return true
		}
	}
	return false
}

func (s *jsonScan) nonEmpty(start int) ([]byte, error) {
	if s.pos == start {
		return nil, s.notJSON("want a value")
	}
	return s.text[start:s.pos], nil
}

// skipString moves past the string that starts at pos; false when the line ends inside it.
func (s *jsonScan) skipString() bool {
	for s.pos++; s.pos < len(s.text); s.pos++ {
		switch s.text[s.pos] {
		case '\\':
			s.pos++
		case '"':
			s.pos++
			return true
		}
	}
	return false
}
