package workload

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// The Mooncake reader against encoding/json on every input the fuzzer finds.

// FuzzReadMooncakeTrace: no input makes the Mooncake reader panic or print a multi-line error; what
// it accepts is JSON that encoding/json reads to the same numbers, and survives the broadcast
// encoding and expansion. Run it with `go test ./hicache/workload -run '^$' -fuzz
// FuzzReadMooncakeTrace -fuzztime 30s`.
func FuzzReadMooncakeTrace(f *testing.F) {
	f.Add(
		[]byte(
			`{"timestamp": 0, "input_length": 9, "output_length": 6, "hash_ids": [0, 1, 2]}` + "\n" + `{"op":"flush"}`,
		),
	)
	f.Add([]byte(`{"hash_ids":[7],"timestamp":1,"output_length":0,"input_length":4}` + "\r\n"))
	f.Add([]byte(`{"timestamp": 0, "input_length": 5, "output_length": 6, "hash_ids": [0, -1]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		events, err := ReadTraceAs(
			bytes.NewReader(data),
			"fuzz.jsonl",
			mooncakeOptions(TraceMooncake),
		)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		checkMooncakeAgainstEncodingJSON(t, data, events)
		decoded, err := DecodeEvents(EncodeEvents(events))
		if err != nil || !eventsEqual(decoded, events) {
			t.Fatalf("EncodeEvents -> DecodeEvents: %v", err)
		}
		ExpandEvents(decoded, 7)
		for _, e := range decoded {
			if !e.Flush && len(e.Request.InputIDs) != int(e.Request.Blocks.InputTokens) {
				t.Fatalf(
					"expanded %d tokens, input_length %d",
					len(e.Request.InputIDs),
					e.Request.Blocks.InputTokens,
				)
			}
		}
	})
}

func checkMooncakeAgainstEncodingJSON(t *testing.T, data []byte, events []Event) {
	t.Helper()
	i := 0
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if line = bytes.Trim(line, " \t\r"); len(line) == 0 {
			continue
		}
		var oracle struct {
			Op           *string
			InputLength  int64    `json:"input_length"`
			OutputLength int64    `json:"output_length"`
			HashIDs      []uint64 `json:"hash_ids"`
		}
		if err := json.Unmarshal(line, &oracle); err != nil {
			t.Fatalf("accepted line %q that encoding/json rejects: %v", line, err)
		}
		e := events[i]
		i++
		if e.Flush != (oracle.Op != nil) {
			t.Fatalf("line %q: event %+v", line, e)
		}
		b := e.Request.Blocks
		if !e.Flush &&
			(int64(b.InputTokens) != oracle.InputLength || int64(e.Request.OutputLen) != oracle.OutputLength ||
				!slices.Equal(b.HashIDs, oracle.HashIDs)) {
			t.Fatalf("line %q: event %+v, encoding/json reads %+v", line, e.Request, oracle)
		}
	}
	if i != len(events) {
		t.Fatalf("%d events from %d non-blank lines", len(events), i)
	}
}
