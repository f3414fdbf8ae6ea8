package workload

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// mooncakeOptions reads Mooncake lines of 4-token blocks, so fixtures stay short.
func mooncakeOptions(format TraceFormat) TraceOptions {
	return TraceOptions{Format: format, VocabSize: testVocabSize, BlockTokens: 4}
}

func compactRequest(rid string, inputTokens, outputLen int32, ids ...uint64) Event {
	return Event{
		Request: Request{
			RID:       rid,
			OutputLen: outputLen,
			Blocks:    BlockPrompt{HashIDs: ids, InputTokens: inputTokens, BlockTokens: 4},
		},
	}
}

func TestReadMooncakeTraceValid(t *testing.T) {
	trace := `{"timestamp": 0, "input_length": 8, "output_length": 6, "hash_ids": [0, 1]}` + "\n\n" +
		` {"hash_ids":[0,1,2],"output_length":0,"input_length":9,"timestamp":17} ` + "\r\n" +
		`{"op": "flush"}` + "\n" +
		`{"timestamp": 40, "input_length": 1, "output_length": 1048576, "hash_ids": [9223372036854775807]}` + "\n"
	got, err := ReadTraceAs(strings.NewReader(trace), "m.jsonl", mooncakeOptions(TraceAuto))
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		compactRequest("1", 8, 6, 0, 1),
		compactRequest("3", 9, 0, 0, 1, 2),
		{Flush: true},
		compactRequest("5", 1, 1<<20, 1<<63-1),
	}
	if !eventsEqual(got, want) {
		t.Fatalf("%s", firstDifference(got, want))
	}
}

func TestReadMooncakeTraceErrorsNameTheLine(t *testing.T) {
	const good = `{"timestamp": 0, "input_length": 5, "output_length": 1, "hash_ids": [1, 2]}` + "\n"
	for _, tc := range []struct{ name, line, want string }{
		{"too few ids", `{"timestamp": 0, "input_length": 9, "output_length": 1, "hash_ids": [1, 2]}`,
			"hash_ids holds 2 ids, want ceil(input_length 9 / block tokens 4) = 3 (--trace-block-tokens 4)"},
		{"too many ids", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1, 2]}`, "holds 2 ids, want"},
		{"missing timestamp", `{"input_length": 4, "output_length": 1, "hash_ids": [1]}`, "missing timestamp"},
		{"missing input_length", `{"timestamp": 0, "output_length": 1, "hash_ids": [1]}`, "missing input_length"},
		{"missing output_length", `{"timestamp": 0, "input_length": 4, "hash_ids": [1]}`, "missing output_length"},
		{"missing hash_ids", `{"timestamp": 0, "input_length": 4, "output_length": 1}`, "missing hash_ids"},
		{"negative timestamp", `{"timestamp": -1, "input_length": 4, "output_length": 1, "hash_ids": [1]}`, "timestamp -1 outside"},
		{"zero input_length", `{"timestamp": 0, "input_length": 0, "output_length": 1, "hash_ids": [1]}`, "input_length 0 outside [1, 16777216]"},
		{"huge input_length", `{"timestamp": 0, "input_length": 16777217, "output_length": 1, "hash_ids": [1]}`, "input_length 16777217 outside"},
		{"negative output_length", `{"timestamp": 0, "input_length": 4, "output_length": -2, "hash_ids": [1]}`, "output_length -2 outside [0, 1048576]"},
		{"float input_length", `{"timestamp": 0, "input_length": 4.0, "output_length": 1, "hash_ids": [1]}`, "input_length 4.0 is not an integer"},
		{"negative id", `{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1, -2]}`, "hash_ids[1]: -2 is not an id"},
		{"id over 63 bits", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [9223372036854775808]}`, "hash_ids[0]: 9223372036854775808 is not an id"},
		{"id a string", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": ["1"]}`, `hash_ids[0]: "1" is not an id`},
		{"stray comma", `{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1,,2]}`, "hash_ids[1]: nothing is not an id"},
		{"missing comma", `{"timestamp": 0, "input_length": 8, "output_length": 1, "hash_ids": [1 2]}`, "hash_ids[1]: want ',' before 2"},
		{"empty ids", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": []}`, "empty hash_ids"},
		{"ids not an array", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": 1}`, "hash_ids 1 is not an array"},
		{"unknown field", `{"timestamp": 0, "input_length": 4, "output_length": 1, "hash_ids": [1], "rid": "a"}`,
			`unknown field "rid" (want timestamp, input_length, output_length, hash_ids or op)`},
		{"duplicate field", `{"timestamp": 0, "input_length": 4, "input_length": 4, "output_length": 1, "hash_ids": [1]}`, `duplicate field "input_length"`},
		{"flush with a field", `{"op": "flush", "timestamp": 3}`, "takes no other field"},
		{"not JSON", `{"timestamp": 0, input_length: 4}`, "not JSON"},
	} {
		// The bad line is line 3, after a good line and a blank one, so a wrong count shows.
		trace := good + "\n" + tc.line + "\n" + good
		_, err := ReadTraceAs(strings.NewReader(trace), "mc.jsonl", mooncakeOptions(TraceMooncake))
		var traceErr *TraceError
		if !errors.As(err, &traceErr) || traceErr.Line != 3 ||
			!strings.HasPrefix(err.Error(), "mc.jsonl:3: ") ||
			!strings.Contains(err.Error(), tc.want) ||
			strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %v, want one line mc.jsonl:3: ...%s...", tc.name, err, tc.want)
		}
	}
}

func TestTraceFormatIsDetectedFromTheFirstRequestLine(t *testing.T) {
	const tokens = `{"rid": "a", "input_ids": [1, 2]}`
	const mooncake = `{"timestamp": 0, "input_length": 2, "output_length": 1, "hash_ids": [7]}`
	for _, tc := range []struct {
		name, trace string
		format      TraceFormat
		compact     bool   // the request is read as a Mooncake line
		wantErr     string // "" = reads
	}{
		{"tokens", tokens, TraceAuto, false, ""},
		{"mooncake", mooncake, TraceAuto, true, ""},
		{"mooncake after a flush", `{"op": "flush"}` + "\n" + mooncake, TraceAuto, true, ""},
		{"tokens after a flush", "\n" + `{"op": "flush"}` + "\n" + tokens, TraceAuto, false, ""},
		{"mixed: tokens first", tokens + "\n" + mooncake, TraceAuto, false, `t.jsonl:2: unknown field "timestamp"`},
		{"mixed: mooncake first", mooncake + "\n" + tokens, TraceAuto, true, `t.jsonl:2: unknown field "rid"`},
		{"forced tokens", mooncake, TraceTokens, false, `t.jsonl:1: unknown field "timestamp"`},
		{"forced mooncake", tokens, TraceMooncake, true, `t.jsonl:1: unknown field "rid"`},
	} {
		o := mooncakeOptions(tc.format)
		got, err := ReadTraceAs(strings.NewReader(tc.trace), "t.jsonl", o)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %s...", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if last := got[len(got)-1].Request; last.Blocks.Compact() != tc.compact {
			t.Errorf("%s: read %+v, want compact = %v", tc.name, last, tc.compact)
		}
	}
}

func TestTraceLimitReadsTheFirstNRequestsOnly(t *testing.T) {
	var tokens, mooncake strings.Builder
	for i := range 5 {
		fmt.Fprintf(&tokens, `{"rid": "r%d", "input_ids": [%d]}`+"\n", i, i)
		fmt.Fprintf(
			&mooncake,
			`{"timestamp": %d, "input_length": 3, "output_length": 1, "hash_ids": [%d]}`+"\n",
			i,
			i,
		)
		if i == 1 {
			tokens.WriteString(`{"op": "flush"}` + "\n")
			mooncake.WriteString(`{"op": "flush"}` + "\n")
		}
	}
	// A broken line after the limit is never read: the limit also bounds the reading.
	for name, trace := range map[string]string{"tokens": tokens.String(), "mooncake": mooncake.String()} {
		o := mooncakeOptions(TraceAuto)
		o.LimitRequests = 3
		got, err := ReadTraceAs(strings.NewReader(trace+"broken\n"), name, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(got) != 4 || !got[2].Flush || len(requestsOf(got)) != 3 {
			t.Fatalf("%s: limit 3 read %+v, want 2 requests, the flush, 1 request", name, got)
		}
		o.LimitRequests = 0
		if _, err := ReadTraceAs(strings.NewReader(trace+"broken\n"), name, o); err == nil {
			t.Fatalf("%s: without a limit the broken last line was accepted", name)
		}
	}
}

// compactEdgeEvents mix both request kinds with the largest values the decoder accepts.
var compactEdgeEvents = append(
	slices.Clone(encodingEdgeEvents),
	compactRequest("1", 9, 0, 0, 1, 2),
	Event{
		Request: Request{
			RID:       "",
			OutputLen: -1,
			Blocks: BlockPrompt{
				HashIDs:     []uint64{1<<63 - 1},
				InputTokens: 1,
				BlockTokens: BlockTokensMax,
			},
		},
	},
	Event{Flush: true},
	compactRequest("3993", 4, 3, 5),
)

func TestEncodeDecodeCompactEventsRoundTrip(t *testing.T) {
	got, err := DecodeEvents(EncodeEvents(compactEdgeEvents))
	if err != nil {
		t.Fatal(err)
	}
	if !eventsEqual(got, compactEdgeEvents) {
		t.Fatalf("%s", firstDifference(got, compactEdgeEvents))
	}
	// An expanded request still travels compact: its tokens are recomputed, not sent.
	expanded := slices.Clone(compactEdgeEvents)
	ExpandEvents(expanded, 100)
	if a, b := len(EncodeEvents(expanded)), len(EncodeEvents(compactEdgeEvents)); a != b {
		t.Fatalf("expanded events encode to %d bytes, compact ones to %d", a, b)
	}
}

func TestDecodeCompactEventsRejectsCorruption(t *testing.T) {
	buf := EncodeEvents(compactEdgeEvents)
	for n := range len(buf) {
		if _, err := DecodeEvents(buf[:n]); !errors.Is(err, errEventsCorrupt) {
			t.Fatalf("%d of %d bytes: error %v", n, len(buf), err)
		}
	}
	for bit := range 8 * len(buf) {
		flipped := slices.Clone(buf)
		flipped[bit/8] ^= 1 << (bit % 8)
		if _, err := DecodeEvents(flipped); !errors.Is(err, errEventsCorrupt) {
			t.Fatalf("bit %d flipped: error %v", bit, err)
		}
	}
	for _, tc := range []struct{ name, want, body string }{
		{"ids do not match the length", "hash_ids holds 2 ids", "HCE1\x01\x02\x00\x00\x09\x04\x02\x01\x02"},
		{"zero block tokens", "block tokens 0", "HCE1\x01\x02\x00\x00\x05\x00\x01\x01"},
		{"zero input tokens", "input_length 0", "HCE1\x01\x02\x00\x00\x00\x04\x00"},
		{"id over 63 bits", "above", "HCE1\x01\x02\x00\x00\x01\x04\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"},
		{"ids beyond the buffer", "hash_ids length", "HCE1\x01\x02\x00\x00\x05\x04\x09\x01"},
	} {
		_, err := DecodeEvents(withChecksum([]byte(tc.body)))
		if !errors.Is(err, errEventsCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func expand(b BlockPrompt, vocabSize int) []int32 { return b.AppendTokens(nil, vocabSize) }

func TestExpandIsAPureFunctionOfTheIDs(t *testing.T) {
	const vocab = 50
	a := BlockPrompt{HashIDs: []uint64{3, 8, 5}, InputTokens: 10, BlockTokens: 4}
	same := BlockPrompt{HashIDs: []uint64{3, 8, 5}, InputTokens: 10, BlockTokens: 4}
	longer := BlockPrompt{HashIDs: []uint64{3, 8, 5, 6}, InputTokens: 16, BlockTokens: 4}
	other := BlockPrompt{HashIDs: []uint64{3, 9, 5}, InputTokens: 10, BlockTokens: 4}
	ta := expand(a, vocab)
	if len(ta) != 10 || !slices.Equal(ta, expand(same, vocab)) {
		t.Fatalf("same ids: %v and %v", ta, expand(same, vocab))
	}
	// The last block holds 10 - 4*2 = 2 tokens: the first two of block 5, as a longer chain holds
	// them.
	if tl := expand(longer, vocab); !slices.Equal(ta, tl[:10]) {
		t.Fatalf("a chain's prefix differs from the longer chain's: %v vs %v", ta, tl)
	}
	to := expand(other, vocab)
	if !slices.Equal(ta[:4], to[:4]) || slices.Equal(ta[4:8], to[4:8]) {
		t.Fatalf(
			"ids 3,8 vs 3,9: %v vs %v, want the first block equal and the second different",
			ta,
			to,
		)
	}
	for _, tok := range expand(longer, vocab) {
		if tok < 0 || tok >= vocab {
			t.Fatalf("token %d outside [0, %d)", tok, vocab)
		}
	}
	events := []Event{{Request: Request{Blocks: a}}}
	ExpandEvents(events, vocab)
	if !slices.Equal(events[0].Request.InputIDs, ta) {
		t.Fatalf("ExpandEvents: %v, want %v", events[0].Request.InputIDs, ta)
	}
}

// WriteMooncakeTrace turns the synthetic workload into block ids: two requests get equal leading
// ids exactly as far as their token blocks agree (each block whole, or both the same short last
// block).
func TestWriteMooncakeTraceIDsFollowEqualPrefixes(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.FlushEvery = 50
	events := mustGenerate(t, cfg)
	var trace bytes.Buffer
	if err := WriteMooncakeTrace(&trace, events, 16); err != nil {
		t.Fatal(err)
	}
	read, err := ReadTraceAs(
		&trace,
		"gen.jsonl",
		TraceOptions{VocabSize: cfg.VocabSize, BlockTokens: 16},
	)
	if err != nil {
		t.Fatal(err)
	}
	if len(read) != len(events) {
		t.Fatalf("%d events written, %d read", len(events), len(read))
	}
	reqs, got := requestsOf(events), requestsOf(read)
	for i := range reqs {
		if got[i].Blocks.InputTokens != int32(len(reqs[i].InputIDs)) ||
			got[i].OutputLen != reqs[i].OutputLen {
			t.Fatalf("request %d: %+v, from %d tokens", i, got[i], len(reqs[i].InputIDs))
		}
		for j := range i {
			want := sharedBlocks(reqs[i].InputIDs, reqs[j].InputIDs, 16)
			if n := commonPrefix(got[i].Blocks.HashIDs, got[j].Blocks.HashIDs); n != want {
				t.Fatalf(
					"requests %d and %d: %d leading ids equal, %d blocks of tokens",
					j,
					i,
					n,
					want,
				)
			}
		}
	}
}

// sharedBlocks counts the leading blocks of a and b that are equal, a block being equal when both
// have it whole and equal, or both end with it and it is equal.
func sharedBlocks(a, b []int32, block int) int {
	n := 0
	for start := 0; start < len(a) && start < len(b); start += block {
		ea, eb := min(start+block, len(a)), min(start+block, len(b))
		if ea != eb || !slices.Equal(a[start:ea], b[start:eb]) {
			break
		}
		n++
	}
	return n
}

func commonPrefix[T comparable](a, b []T) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// TestScanTimestampOrderCountsLinesThatGoBack: a line earlier than the latest before it counts (not
// only one earlier than its neighbour), with the first such line's number; flushes, blank lines and
// the token format count for nothing, and the request limit stops the scan as it stops a replay's
// read.
func TestScanTimestampOrderCountsLinesThatGoBack(t *testing.T) {
	line := func(ms int) string {
		return fmt.Sprintf(
			`{"timestamp": %d, "input_length": 10, "output_length": 1, "hash_ids": [1]}`,
			ms,
		)
	}
	trace := strings.Join(
		[]string{
			line(0),
			line(500),
			"",
			line(100),
			`{"op": "flush"}`,
			line(400),
			line(900),
			line(900),
			line(800),
		},
		"\n",
	)
	for _, tc := range []struct {
		limit int
		want  TimestampOrder
	}{
		{0, TimestampOrder{Backwards: 3, FirstLine: 4, LatestMs: 900}},
		{2, TimestampOrder{LatestMs: 500}},
		{3, TimestampOrder{Backwards: 1, FirstLine: 4, LatestMs: 500}},
	} {
		got, err := ScanTimestampOrder(strings.NewReader(trace), tc.limit)
		if err != nil || got != tc.want {
			t.Errorf("limit %d: %+v, %v; want %+v", tc.limit, got, err, tc.want)
		}
	}
	tokens := `{"rid": "a", "input_ids": [1, 2], "output_len": 1}` + "\n" + `{"rid": "b", "input_ids": [1], "output_len": 1}`
	if got, err := ScanTimestampOrder(strings.NewReader(tokens), 0); err != nil ||
		got != (TimestampOrder{LatestMs: -1}) {
		t.Errorf("a token trace: %+v, %v; want none", got, err)
	}
}
