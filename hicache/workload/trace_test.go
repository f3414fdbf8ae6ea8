package workload

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var updateTraceGolden = flag.Bool(
	"update-trace-golden",
	false,
	"rewrite hicache/testdata/trace/broken/*.err",
)

// testVocabSize is the vocabulary of the trace fixtures (Llama 2's).
const testVocabSize = 32000

func TestWriteTraceReadTraceRoundTrip(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.FlushEvery = 13
	events := mustGenerate(t, cfg)
	events = append(
		events,
		Event{Request: Request{RID: "quote\" back\\slash <tag> é", InputIDs: []int32{0}}},
	)
	var trace bytes.Buffer
	if err := WriteTrace(&trace, events); err != nil {
		t.Fatal(err)
	}
	got, err := ReadTrace(&trace, "roundtrip.jsonl", cfg.VocabSize)
	if err != nil {
		t.Fatal(err)
	}
	if !eventsEqual(got, events) {
		t.Fatalf("round trip: %s", firstDifference(got, events))
	}
}

// valid_small.jsonl holds a blank line, a numeric rid, an absent output_len, fields out of order,
// surrounding spaces and a CRLF line end.
func TestReadTraceFileValidSmall(t *testing.T) {
	got, err := readTraceFile(
		filepath.Join("testdata", "trace", "valid_small.jsonl"),
		testVocabSize,
	)
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{Request: Request{RID: "c0.t0", InputIDs: []int32{1, 2, 3, 4}, OutputLen: 2}},
		{Request: Request{RID: "c1.t0", InputIDs: []int32{1, 2, 9}, OutputLen: 0}},
		{Request: Request{RID: "c0.t1", InputIDs: []int32{1, 2, 3, 4, 7, 8, 5, 6}, OutputLen: 3}},
		{Flush: true},
		{Request: Request{RID: "42", InputIDs: []int32{0, 31999}}},
		{Request: Request{RID: "c1.t1", InputIDs: []int32{5}, OutputLen: 1}},
		{Request: Request{RID: "crlf", InputIDs: []int32{10, 11}, OutputLen: 1}},
	}
	if !eventsEqual(got, want) {
		t.Fatalf("valid_small.jsonl: %s", firstDifference(got, want))
	}
}

// Each broken fixture's error is pinned, word for word, in the .err file beside it: these are the
// messages users read. Rewrite them with `go test ./hicache/workload -run
// TestReadTraceFileBrokenGolden -update-trace-golden`.
func TestReadTraceFileBrokenGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "trace", "broken", "*.jsonl"))
	if err != nil || len(paths) < 5 {
		t.Fatalf("broken fixtures %v (%v), want at least 5", paths, err)
	}
	for _, path := range paths {
		_, err := readTraceFile(path, testVocabSize)
		if err == nil {
			t.Errorf("%s: read without error", path)
			continue
		}
		goldenPath := strings.TrimSuffix(path, ".jsonl") + ".err"
		if *updateTraceGolden {
			if werr := os.WriteFile(goldenPath, []byte(err.Error()+"\n"), 0o644); werr != nil {
				t.Fatal(werr)
			}
			continue
		}
		golden, rerr := os.ReadFile(goldenPath)
		if rerr != nil {
			t.Fatalf("%v (rewrite the golden files with -update-trace-golden)", rerr)
		}
		if got, want := err.Error(), strings.TrimSuffix(string(golden), "\n"); got != want {
			t.Errorf("%s:\n got  %s\n want %s", path, got, want)
		}
	}
}

func TestReadTraceErrorsNameTheLine(t *testing.T) {
	const good = `{"rid": "ok", "input_ids": [1], "output_len": 1}` + "\n"
	for _, tc := range []struct {
		name, line, want string
	}{
		{"not JSON", `{"rid": "a", input_ids: [1]}`, "not JSON"},
		{"truncated object", `{"rid": "a", "input_ids": [1]`, "not JSON"},
		{"two objects", `{"op": "flush"} {"op": "flush"}`, "data after the object"},
		{"not an object", `[1, 2, 3]`, "not a JSON object"},
		{"trailing comma in object", `{"rid": "a", "input_ids": [1],}`, "not JSON: want a field name at byte 31"},
		{"missing comma", `{"rid": "a" "input_ids": [1]}`, "not JSON: want ',' or '}' at byte 13"},
		{"missing colon", `{"rid" "a", "input_ids": [1]}`, "not JSON: want ':' after a field name"},
		{"missing value", `{"rid": , "input_ids": [1]}`, "not JSON: want a value at byte 9"},
		{"unquoted key", `{rid: "a", "input_ids": [1]}`, "not JSON: want a field name"},
		{"bad escape in key", `{"r\id": "a", "input_ids": [1]}`, "not JSON: field name"},
		{"not JSON whitespace", "\v" + `{"rid": "a", "input_ids": [1]}`, "not a JSON object"},
		{"unterminated string", `{"rid": "a, "input_ids": [1]}`, "not JSON"},
		{"bad escape in rid", `{"rid": "\q", "input_ids": [1]}`, "rid: invalid character"},
		{"raw control byte in rid", "{\"rid\": \"a\tb\", \"input_ids\": [1]}", "rid: invalid character"},
		{"unknown op", `{"op": "evict"}`, `unknown op "evict"`},
		{"op not a string", `{"op": 1}`, "unknown op 1"},
		{"flush with a rid", `{"op": "flush", "rid": "a"}`, "takes no other field"},
		{"unknown field", `{"rid": "a", "input_ids": [1], "outputlen": 1}`, `unknown field "outputlen"`},
		{"field in other case", `{"RID": "a", "input_ids": [1]}`, `unknown field "RID"`},
		{"duplicate field", `{"rid": "a", "input_ids": [1], "rid": "b"}`, `duplicate field "rid"`},
		{"missing rid", `{"input_ids": [1]}`, "missing rid"},
		{"empty rid", `{"rid": "", "input_ids": [1]}`, "empty rid"},
		{"rid a float", `{"rid": 1.5, "input_ids": [1]}`, "rid 1.5 is neither"},
		{"rid null", `{"rid": null, "input_ids": [1]}`, "rid null is neither"},
		{"missing input_ids", `{"rid": "a", "output_len": 1}`, "missing input_ids"},
		{"empty input_ids", `{"rid": "a", "input_ids": [ ]}`, "empty input_ids"},
		{"input_ids not an array", `{"rid": "a", "input_ids": "1 2"}`, "is not an array"},
		{"input_ids null", `{"rid": "a", "input_ids": null}`, "is not an array"},
		{"token with a leading zero", `{"rid": "a", "input_ids": [01]}`, "input_ids[0]: 01 is not an integer"},
		{"trailing comma in input_ids", `{"rid": "a", "input_ids": [1, ]}`, "input_ids[1]: missing token id"},
		{"leading comma in input_ids", `{"rid": "a", "input_ids": [,1]}`, "input_ids[0]: missing token id"},
		{"missing comma in input_ids", `{"rid": "a", "input_ids": [1 2]}`, "input_ids[1]: want ',' before 2"},
		{"token with a plus", `{"rid": "a", "input_ids": [+1]}`, "input_ids[0]: +1 is not an integer"},
		{"rid with a leading zero", `{"rid": 017, "input_ids": [1]}`, "rid 017 is neither"},
		{"token a float", `{"rid": "a", "input_ids": [1, 2.5]}`, "input_ids[1]: 2.5 is not an integer"},
		{"token a string", `{"rid": "a", "input_ids": ["7"]}`, `input_ids[0]: "7" is not an integer`},
		{"token nested", `{"rid": "a", "input_ids": [[1, 2]]}`, "input_ids[0]: [1 is not an integer"},
		{"token negative", `{"rid": "a", "input_ids": [3, -1]}`, "input_ids[1]: token id -1 outside [0, 32000)"},
		{"token at vocab size", `{"rid": "a", "input_ids": [32000]}`, "token id 32000 outside [0, 32000)"},
		{"token huge", `{"rid": "a", "input_ids": [99999999999999999999999]}`, "outside [0, 32000)"},
		{"output_len negative", `{"rid": "a", "input_ids": [1], "output_len": -1}`, "output_len -1 outside [0, 1048576]"},
		{"output_len too big", `{"rid": "a", "input_ids": [1], "output_len": 1048577}`, "outside [0, 1048576]"},
		{"output_len huge", `{"rid": "a", "input_ids": [1], "output_len": 1e400}`, "output_len 1e400 is not an integer"},
		{"output_len overflow", `{"rid": "a", "input_ids": [1], "output_len": 99999999999999999999}`, "outside"},
		{"output_len a string", `{"rid": "a", "input_ids": [1], "output_len": "3"}`, "is not an integer"},
	} {
		// The bad line is line 3: after a good line and a blank one, so a wrong count shows.
		trace := good + "\n" + tc.line + "\n" + good
		_, err := ReadTrace(strings.NewReader(trace), "trace.jsonl", testVocabSize)
		var traceErr *TraceError
		if !errors.As(err, &traceErr) || traceErr.Line != 3 || traceErr.File != "trace.jsonl" {
			t.Errorf("%s: error %v, want a TraceError for trace.jsonl:3", tc.name, err)
			continue
		}
		if msg := err.Error(); !strings.HasPrefix(msg, "trace.jsonl:3: ") ||
			!strings.Contains(msg, tc.want) ||
			strings.Contains(msg, "\n") {
			t.Errorf("%s: error %q, want one line trace.jsonl:3: ...%s...", tc.name, msg, tc.want)
		}
	}
}

func TestReadTraceQuotesLongValuesShortly(t *testing.T) {
	line := `{"rid": "a", "input_ids": [1], "` + strings.Repeat("x", 10000) + `": 1}`
	_, err := ReadTrace(strings.NewReader(line), "t.jsonl", testVocabSize)
	if err == nil || len(err.Error()) > 200 {
		t.Fatalf("error %.300q, want a short one", err)
	}
}

func TestReadTraceRejectsALineOverTheBound(t *testing.T) {
	const lineBytesMax = 1024
	long := `{"rid": "a", "input_ids": [` + strings.Repeat("1,", lineBytesMax) + `1]}`
	trace := `{"rid": "a", "input_ids": [1]}` + "\n" + long + "\n"
	_, err := readTrace(
		strings.NewReader(trace),
		"big.jsonl",
		TraceOptions{Format: TraceTokens, VocabSize: testVocabSize},
		lineBytesMax,
	)
	if err == nil || !strings.HasPrefix(err.Error(), "big.jsonl:2: line longer than 1024 bytes") {
		t.Fatalf("error %v, want big.jsonl:2: line longer than 1024 bytes", err)
	}
	if traceLineBytesMax != 64<<20 {
		t.Fatalf(
			"ReadTrace bounds lines at %d bytes, TraceFormatHelp and the report say 64 MiB",
			traceLineBytesMax,
		)
	}
}

func TestReadTraceWithoutRequestsIsAnError(t *testing.T) {
	for _, trace := range []string{"", "\n\n  \n", `{"op": "flush"}` + "\n" + `{"op": "flush"}`} {
		_, err := ReadTrace(strings.NewReader(trace), "empty.jsonl", testVocabSize)
		if err == nil || err.Error() != "trace empty.jsonl holds no requests" {
			t.Errorf("trace %q: error %v, want \"trace empty.jsonl holds no requests\"", trace, err)
		}
	}
}

func TestReadTraceFileMissingNamesThePath(t *testing.T) {
	path := filepath.Join("testdata", "trace", "no_such_trace.jsonl")
	_, err := readTraceFile(path, testVocabSize)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want a not-exist error naming %s", err, path)
	}
}

func TestReadTraceRejectsABadVocabSize(t *testing.T) {
	for _, vocabSize := range []int{0, -1, 1<<31 + 1} {
		if _, err := ReadTrace(strings.NewReader(`{"rid": "a", "input_ids": [0]}`), "v.jsonl", vocabSize); err == nil {
			t.Errorf("vocab size %d accepted", vocabSize)
		}
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestReadTraceReportsReadErrors(t *testing.T) {
	r := io.MultiReader(strings.NewReader(`{"rid": "a", "input_ids": [0]}`+"\n"), failingReader{})
	_, err := ReadTrace(r, "r.jsonl", testVocabSize)
	if err == nil || err.Error() != "r.jsonl:2: read: disk on fire" {
		t.Fatalf("error %v, want r.jsonl:2: read: disk on fire", err)
	}
}

// FuzzReadTrace: no input makes ReadTrace panic, and whatever it accepts survives WriteTrace and
// the broadcast encoding unchanged. Run it with `go test ./hicache/workload -run '^$' -fuzz
// FuzzReadTrace -fuzztime 30s`.
func FuzzReadTrace(f *testing.F) {
	for _, pattern := range []string{"*.jsonl", "broken/*.jsonl"} {
		paths, _ := filepath.Glob(filepath.Join("testdata", "trace", pattern))
		for _, path := range paths {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	f.Add([]byte(`{"rid": -0, "input_ids": [-0, 0], "output_len": 0}`))
	f.Add([]byte(`{"rid": "\u00e9\ud800", "input_ids": [1,2,3]}` + "\r\n" + `{"op":"flush"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const vocabSize = 1000
		events, err := ReadTrace(bytes.NewReader(data), "fuzz.jsonl", vocabSize)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error spans lines: %q", err)
			}
			return
		}
		checkAgainstEncodingJSON(t, data, events)
		var written bytes.Buffer
		if err := WriteTrace(&written, events); err != nil {
			t.Fatal(err)
		}
		again, err := ReadTrace(&written, "rewritten.jsonl", vocabSize)
		if err != nil || !eventsEqual(again, events) {
			t.Fatalf("WriteTrace -> ReadTrace: %v", err)
		}
		decoded, err := DecodeEvents(EncodeEvents(events))
		if err != nil || !eventsEqual(decoded, events) {
			t.Fatalf("EncodeEvents -> DecodeEvents: %v", err)
		}
	})
}

// checkAgainstEncodingJSON is the fuzz oracle: ReadTrace scans lines itself, so every line it
// accepts must be valid JSON and decode, with encoding/json, to the event it returned.
func checkAgainstEncodingJSON(t *testing.T, data []byte, events []Event) {
	t.Helper()
	var lines [][]byte
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		if line = bytes.Trim(line, " \t\r"); len(line) > 0 {
			lines = append(lines, line)
		}
	}
	if len(lines) != len(events) {
		t.Fatalf("%d events from %d non-blank lines", len(events), len(lines))
	}
	for i, line := range lines {
		var oracle struct {
			Op        *string
			RID       json.RawMessage
			InputIDs  []int64 `json:"input_ids"`
			OutputLen int64   `json:"output_len"`
		}
		if err := json.Unmarshal(line, &oracle); err != nil {
			t.Fatalf("accepted line %q that encoding/json rejects: %v", line, err)
		}
		if got := events[i]; got.Flush != (oracle.Op != nil) || got.Flush && *oracle.Op != "flush" {
			t.Fatalf("line %q: event %+v", line, got)
		}
		if events[i].Flush {
			continue
		}
		r := events[i].Request
		rid := string(oracle.RID)
		if oracle.RID[0] == '"' {
			if err := json.Unmarshal(oracle.RID, &rid); err != nil {
				t.Fatal(err)
			}
		}
		ids := make([]int64, len(r.InputIDs))
		for j, id := range r.InputIDs {
			ids[j] = int64(id)
		}
		if rid != r.RID || !slices.Equal(ids, oracle.InputIDs) ||
			int64(r.OutputLen) != oracle.OutputLen {
			t.Fatalf("line %q: event %+v, encoding/json reads %+v", line, r, oracle)
		}
	}
}

func BenchmarkReadTraceDefault(b *testing.B) {
	var trace bytes.Buffer
	if err := WriteTrace(&trace, mustGenerate(b, DefaultSyntheticConfig())); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(trace.Len()))
	for b.Loop() {
		if _, err := ReadTrace(bytes.NewReader(trace.Bytes()), "bench.jsonl", defaultVocabSize); err != nil {
			b.Fatal(err)
		}
	}
}

// readTraceFile reads the trace at path as the runner reads a --trace (hicache's readTraceFileAs):
// the package opens no file itself.
func readTraceFile(path string, vocabSize int) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *os.PathError names the path
	}
	defer f.Close()
	return ReadTrace(f, path, vocabSize)
}
