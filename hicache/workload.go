package hicache

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"strings"

	"github.com/cphicache/cphicache/pool"
)

// The workload is the event stream every rank of a CP group replays identically (design section 2): CP-rank 0
// reads or generates it and broadcasts each step's events (EncodeEvents / DecodeEvents), and each DP replica
// takes its own share of it (ShardForReplica).

// Request is one inference request: its prompt tokens and how many tokens it will generate.
type Request struct {
	RID       string
	InputIDs  []int32
	OutputLen int32
}

// Event is one line of a workload: a request, or a flush of the whole cache.
type Event struct {
	Flush   bool
	Request Request // zero when Flush is set
}

// The default synthetic workload is sized so that one CP group of 8 ranks, oversubscribed on a 2-core machine,
// replays it in well under a minute, while still exercising hits, evictions and a flush.
const (
	// About 180 conversations of 1..8 turns (4.5 on average) give about 800 requests.
	defaultConversations = 180
	defaultTurnsMax      = 8
	// A few shared system prompts with Zipf popularity: the most popular one is the prefix of about a third of
	// the conversations, so a prefix cache gets cross-conversation hits as well as multi-turn ones.
	defaultSystemPrompts = 8
	// 512 tokens is a whole number of pages for every page size we run (16, 32 and 64 tokens), so a system
	// prompt fills its pages and the first user token starts a fresh page.
	defaultSystemPromptTokens = 512
	// A turn adds 80..240 user tokens and the reply 64..192 tokens: the longest prompt (8 turns) is at most
	// 512 + 8*240 + 7*192 = 3776 tokens, in the 2-4k range of a chat history.
	defaultTurnTokens   = 160
	defaultOutputTokens = 128
	// Llama 2's vocabulary size: token ids stay in [0, 32000).
	defaultVocabSize = 32000
	// About 60% of the ~800 requests: exactly one flush happens mid-run, with cache state to drop before it and
	// a cold cache to refill after it.
	defaultFlushEvery = 480
)

// Bounds on a synthetic configuration: they keep a mistyped flag from asking for more memory than the machine
// has, and every intermediate product in int64.
const (
	syntheticConversationsMax = 1 << 20
	syntheticTurnsMax         = 1 << 10
	syntheticSystemPromptsMax = 1 << 16
	syntheticSegmentTokensMax = 1 << 20 // system prompt, user turn or reply length
	// 2^28 int32 tokens are 1 GiB: far above any replay we run, far below a machine's memory.
	syntheticTotalTokensMax = 1 << 28
	// Token ids are int32, so a vocabulary holds at most 2^31 ids.
	vocabSizeMax = 1 << 31
)

// SyntheticConfig describes a seeded synthetic multi-turn chat workload.
type SyntheticConfig struct {
	Seed               uint64
	Conversations      int // users, each one conversation
	TurnsMax           int // each conversation has 1..TurnsMax turns (seeded)
	SystemPrompts      int // shared system prompts with Zipf (1/rank) popularity
	SystemPromptTokens int
	TurnTokens         int // new user tokens per turn: seeded in [TurnTokens/2, 3*TurnTokens/2]
	OutputTokens       int // reply tokens per turn: seeded in [OutputTokens/2, 3*OutputTokens/2]
	VocabSize          int // token ids in [0, VocabSize)
	FlushEvery         int // a flush after every FlushEvery requests (none after the last); 0 = never
}

// DefaultSyntheticConfig returns the workload `make run` replays; see the default constants for the sizing.
func DefaultSyntheticConfig() SyntheticConfig {
	return SyntheticConfig{
		Seed:               1,
		Conversations:      defaultConversations,
		TurnsMax:           defaultTurnsMax,
		SystemPrompts:      defaultSystemPrompts,
		SystemPromptTokens: defaultSystemPromptTokens,
		TurnTokens:         defaultTurnTokens,
		OutputTokens:       defaultOutputTokens,
		VocabSize:          defaultVocabSize,
		FlushEvery:         defaultFlushEvery,
	}
}

// Validate checks every field against its bound; the error names the field.
func (cfg SyntheticConfig) Validate() error {
	checks := []struct {
		name       string
		value, min int
		max        int
	}{
		{"conversations", cfg.Conversations, 1, syntheticConversationsMax},
		{"turns-max", cfg.TurnsMax, 1, syntheticTurnsMax},
		{"system-prompts", cfg.SystemPrompts, 1, syntheticSystemPromptsMax},
		{"system-prompt-tokens", cfg.SystemPromptTokens, 0, syntheticSegmentTokensMax},
		{"turn-tokens", cfg.TurnTokens, 1, syntheticSegmentTokensMax},
		{"output-tokens", cfg.OutputTokens, 0, syntheticSegmentTokensMax},
		{"vocab-size", cfg.VocabSize, 1, vocabSizeMax},
		{"flush-every-requests", cfg.FlushEvery, 0, syntheticConversationsMax * syntheticTurnsMax},
	}
	for _, c := range checks {
		if c.value < c.min || c.value > c.max {
			return fmt.Errorf("synthetic workload: %s = %d, want %d..%d", c.name, c.value, c.min, c.max)
		}
	}
	if tokens := cfg.worstCaseTokens(); tokens > syntheticTotalTokensMax {
		return fmt.Errorf("synthetic workload: up to %d prompt tokens in all, above the bound of %d: "+
			"lower conversations, turns-max or the token counts", tokens, syntheticTotalTokensMax)
	}
	return nil
}

// worstCaseTokens bounds the prompt tokens of the whole workload: every conversation takes TurnsMax turns and
// every segment its longest length. The field bounds keep it inside int64.
func (cfg SyntheticConfig) worstCaseTokens() int64 {
	turnsMax := int64(cfg.TurnsMax)
	perTurn := int64(segmentTokensMax(cfg.TurnTokens) + segmentTokensMax(cfg.OutputTokens))
	longestPrompt := int64(cfg.SystemPromptTokens) + turnsMax*perTurn
	return int64(cfg.Conversations) * turnsMax * longestPrompt
}

// segmentTokensMax is the longest a segment of nominal length n can be drawn (see drawSegmentTokens).
func segmentTokensMax(n int) int { return n + n/2 }

// GenerateSynthetic returns the synthetic workload of cfg. It is a pure function of cfg: the same cfg gives the
// identical events on every rank, machine and Go version, because it uses only integer arithmetic and its own
// PRNG. Conversations interleave in a seeded order; turn t's prompt is turn t-1's prompt, then turn t-1's reply
// (generated from (seed, conversation, turn), as a chat history would hold it), then new user tokens. The rid of
// conversation c's turn t is "c<c>.t<t>".
func GenerateSynthetic(cfg SyntheticConfig) ([]Event, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	convs := newConversations(cfg)
	schedule := interleave(cfg.Seed, convs)
	events := make([]Event, 0, len(schedule)+flushCount(len(schedule), cfg.FlushEvery))
	for i, c := range schedule {
		events = append(events, Event{Request: convs[c].nextTurn(cfg, c)})
		if cfg.FlushEvery > 0 && (i+1)%cfg.FlushEvery == 0 && i+1 < len(schedule) {
			events = append(events, Event{Flush: true})
		}
	}
	return events, nil
}

// flushCount is the number of flushes between requests of a run of n requests.
func flushCount(requests, flushEvery int) int {
	if flushEvery <= 0 || requests == 0 {
		return 0
	}
	return (requests - 1) / flushEvery
}

// conversation is one user's chat: its shared system prompt and its history so far.
type conversation struct {
	systemPrompt int
	turns        int
	turn         int     // the next turn to generate
	history      []int32 // the previous turn's prompt followed by its reply
}

// Streams of the PRNG: each decision draws from its own stream, so changing one (say the schedule) leaves the
// others (the token contents) as they were.
const (
	streamConversation uint64 = iota + 1
	streamSchedule
	streamSystemPrompt
	streamTurn
)

func newConversations(cfg SyntheticConfig) []conversation {
	zipf := newZipf(cfg.SystemPrompts)
	convs := make([]conversation, cfg.Conversations)
	for c := range convs {
		rng := newSplitMix(streamKey(cfg.Seed, streamConversation, uint64(c), 0))
		convs[c].systemPrompt = zipf.draw(&rng)
		convs[c].turns = 1 + int(rng.below(uint64(cfg.TurnsMax)))
	}
	return convs
}

// interleave returns the order in which conversations take turns: conversation c appears convs[c].turns times,
// in a seeded shuffle (Fisher-Yates), so users' turns interleave as requests from many users would.
func interleave(seed uint64, convs []conversation) []int {
	requests := 0
	for _, conv := range convs {
		requests += conv.turns
	}
	schedule := make([]int, 0, requests)
	for c := range convs {
		for range convs[c].turns {
			schedule = append(schedule, c)
		}
	}
	rng := newSplitMix(streamKey(seed, streamSchedule, 0, 0))
	for i := len(schedule) - 1; i > 0; i-- {
		j := int(rng.below(uint64(i + 1)))
		schedule[i], schedule[j] = schedule[j], schedule[i]
	}
	return schedule
}

// nextTurn returns conversation c's next request and records its reply in the history.
func (conv *conversation) nextTurn(cfg SyntheticConfig, c int) Request {
	rng := newSplitMix(streamKey(cfg.Seed, streamTurn, uint64(c), uint64(conv.turn)))
	if conv.turn == 0 {
		conv.history = systemPromptTokens(cfg, conv.systemPrompt)
	}
	userTokens := drawSegmentTokens(&rng, cfg.TurnTokens)
	outputTokens := drawSegmentTokens(&rng, cfg.OutputTokens)
	prompt := make([]int32, len(conv.history), len(conv.history)+userTokens)
	copy(prompt, conv.history)
	prompt = appendTokens(prompt, &rng, userTokens, cfg.VocabSize)
	req := Request{
		RID:       fmt.Sprintf("c%d.t%d", c, conv.turn),
		InputIDs:  prompt,
		OutputLen: int32(outputTokens),
	}
	// The next turn's prompt holds this one's reply; the history is a copy so req.InputIDs stays unshared.
	history := make([]int32, len(prompt), len(prompt)+outputTokens)
	copy(history, prompt)
	conv.history = appendTokens(history, &rng, outputTokens, cfg.VocabSize)
	conv.turn++
	return req
}

// systemPromptTokens returns system prompt i: its tokens depend only on (seed, i).
func systemPromptTokens(cfg SyntheticConfig, i int) []int32 {
	rng := newSplitMix(streamKey(cfg.Seed, streamSystemPrompt, uint64(i), 0))
	return appendTokens(make([]int32, 0, cfg.SystemPromptTokens), &rng, cfg.SystemPromptTokens, cfg.VocabSize)
}

// drawSegmentTokens draws a length in [n/2, n+n/2]: real turns vary in length, and varied lengths put page
// boundaries at varied offsets in the prompts.
func drawSegmentTokens(rng *splitMix, n int) int {
	low := n / 2
	return low + int(rng.below(uint64(segmentTokensMax(n)-low+1)))
}

func appendTokens(tokens []int32, rng *splitMix, n, vocabSize int) []int32 {
	for range n {
		tokens = append(tokens, int32(rng.below(uint64(vocabSize))))
	}
	return tokens
}

// zipf draws ranks 0..n-1 with probability proportional to 1/(rank+1), in integer arithmetic so the draw is
// the same on every platform (a float64 CDF could differ where the compiler fuses multiply-adds).
type zipf struct{ cumulative []uint64 }

// zipfScale makes 1/(rank+1) an integer weight: with at most 2^16 ranks the smallest weight is still 2^16.
const zipfScale = 1 << 32

func newZipf(n int) zipf {
	z := zipf{cumulative: make([]uint64, n)}
	var total uint64
	for k := range n {
		total += zipfScale / uint64(k+1)
		z.cumulative[k] = total
	}
	return z
}

func (z zipf) draw(rng *splitMix) int {
	u := rng.below(z.cumulative[len(z.cumulative)-1])
	for k, c := range z.cumulative {
		if u < c {
			return k
		}
	}
	panic("zipf: draw beyond the cumulative total") // unreachable: u < the last cumulative weight
}

// splitMix is splitmix64 (Steele, Lea and Flood 2014): a tiny PRNG with a fixed, documented output sequence,
// unlike math/rand's global state.
type splitMix struct{ state uint64 }

func newSplitMix(seed uint64) splitMix { return splitMix{state: seed} }

func (s *splitMix) next() uint64 {
	s.state += 0x9e3779b97f4a7c15
	return pool.Mix64(s.state)
}

// below returns a value in [0, n), n > 0. The modulo bias is below n/2^64: irrelevant for a workload.
func (s *splitMix) below(n uint64) uint64 { return s.next() % n }

// streamKey derives the seed of one PRNG stream from the workload seed and the stream's coordinates.
func streamKey(seed, stream, a, b uint64) uint64 {
	return pool.Mix64(pool.Mix64(pool.Mix64(seed^pool.Mix64(stream))^a) ^ pool.Mix64(b+0x632be59bd9b4e019))
}

// ShardRuleHelp states how ShardForReplica splits a workload; the CLI prints it in --help.
const ShardRuleHelp = "Each DP replica (CP group) serves the requests whose rid maps to it: the part of the rid " +
	"before the first '.' (the conversation, \"c17\" of \"c17.t3\"; the whole rid when it has no '.') is hashed " +
	"with 64-bit FNV-1a, and replica = hash mod dp, so every turn of a conversation lands on the same replica. " +
	"Flush events go to every replica."

// ReplicaForRID returns the DP replica, in [0, dp), that serves rid; see ShardRuleHelp. dp must be positive.
func ReplicaForRID(rid string, dp int) int {
	if dp <= 0 {
		panic(fmt.Sprintf("ReplicaForRID: dp = %d, want > 0", dp))
	}
	conversation := rid
	if dot := strings.IndexByte(rid, '.'); dot >= 0 {
		conversation = rid[:dot]
	}
	h := fnv.New64a()
	h.Write([]byte(conversation)) // a hash.Hash never returns a write error
	return int(h.Sum64() % uint64(dp))
}

// ShardForReplica returns, in order, the events replica (of dp) replays: its requests (ReplicaForRID) and every
// flush. It panics unless 0 <= replica < dp: the topology has checked both long before.
func ShardForReplica(events []Event, dp, replica int) []Event {
	if replica < 0 || replica >= dp {
		panic(fmt.Sprintf("ShardForReplica: replica %d outside [0, %d)", replica, dp))
	}
	shard := make([]Event, 0, len(events)/dp+1)
	for _, e := range events {
		if e.Flush || ReplicaForRID(e.Request.RID, dp) == replica {
			shard = append(shard, e)
		}
	}
	return shard
}

// The broadcast form of a run of events, all integers unsigned varints (encoding/binary):
//
//	magic "HCE1" | count | count events | CRC-32C (little-endian) of everything before it
//	event: 0 = request | len(rid) | rid bytes | uint32(output_len) | len(input_ids) | uint32(id) per id
//	       1 = flush
//
// The checksum makes a corrupt or mismatched buffer an error rather than a silently different event stream,
// which would break the ranks' replicated determinism.
const (
	eventsMagic       = "HCE1"
	eventKindRequest  = 0
	eventKindFlush    = 1
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
		r := e.Request
		buf = append(buf, eventKindRequest)
		buf = binary.AppendUvarint(buf, uint64(len(r.RID)))
		buf = append(buf, r.RID...)
		buf = binary.AppendUvarint(buf, uint64(uint32(r.OutputLen)))
		buf = binary.AppendUvarint(buf, uint64(len(r.InputIDs)))
		for _, id := range r.InputIDs {
			buf = binary.AppendUvarint(buf, uint64(uint32(id)))
		}
	}
	return binary.LittleEndian.AppendUint32(buf, crc32.Checksum(buf, castagnoli))
}

// encodedSizeEstimate assumes 3-byte token ids (vocabularies up to 2^21): one allocation in the common case.
func encodedSizeEstimate(events []Event) int {
	size := len(eventsMagic) + binary.MaxVarintLen64 + eventsTrailerSize
	for _, e := range events {
		size += 1 + 3*binary.MaxVarintLen32 + len(e.Request.RID) + 3*len(e.Request.InputIDs)
	}
	return size
}

// errEventsCorrupt is wrapped by every DecodeEvents error.
var errEventsCorrupt = errors.New("corrupt event buffer")

// DecodeEvents is the inverse of EncodeEvents. A truncated or corrupt buffer is an error; counts are checked
// against the bytes left before anything is allocated, so no input makes it allocate more than len(buf) words.
func DecodeEvents(buf []byte) ([]Event, error) {
	minSize := len(eventsMagic) + 1 + eventsTrailerSize
	if len(buf) < minSize {
		return nil, fmt.Errorf("%w: %d bytes, want at least %d", errEventsCorrupt, len(buf), minSize)
	}
	body, trailer := buf[:len(buf)-eventsTrailerSize], buf[len(buf)-eventsTrailerSize:]
	if want, got := binary.LittleEndian.Uint32(trailer), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("%w: checksum %08x, want %08x", errEventsCorrupt, got, want)
	}
	if string(body[:len(eventsMagic)]) != eventsMagic {
		return nil, fmt.Errorf("%w: magic %q, want %q", errEventsCorrupt, body[:len(eventsMagic)], eventsMagic)
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

// eventDecoder reads the event encoding; after the first error every read returns zero and err keeps it.
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

// count reads a length whose items each take at least itemBytesMin bytes, and rejects one the buffer cannot hold.
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
	default:
		d.fail("event kind %d", kind)
		return Event{}
	}
}

func (d *eventDecoder) request() Request {
	var r Request
	ridBytes := d.count("rid length", 1)
	if d.err != nil {
		return r
	}
	r.RID = string(d.buf[:ridBytes])
	d.buf = d.buf[ridBytes:]
	r.OutputLen = int32(d.uint32("output_len"))
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
