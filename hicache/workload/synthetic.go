package workload

import (
	"fmt"
	"math/bits"
	"slices"

	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// The default synthetic workload is sized so that one CP group of 8 ranks, oversubscribed on a
// 2-core machine, replays it in well under a minute, while still exercising hits, evictions and a
// flush.
const (
	// About 180 conversations of 1..8 turns (4.5 on average) give about 800 requests.
	defaultConversations = 180
	defaultTurnsMax      = 8
	// A few shared system prompts with Zipf popularity: the most popular one is the prefix of about
	// a third of the conversations, so a prefix cache gets cross-conversation hits as well as
	// multi-turn ones.
	defaultSystemPrompts = 8
	// 512 tokens is a whole number of pages for every page size we run (16, 32 and 64 tokens), so a
	// system prompt fills its pages and the first user token starts a fresh page.
	defaultSystemPromptTokens = 512
	// A turn adds 80..240 user tokens and the reply 64..192 tokens: the longest prompt (8 turns) is
	// at most 512 + 8*240 + 7*192 = 3776 tokens, in the 2-4k range of a chat history.
	defaultTurnTokens   = 160
	defaultOutputTokens = 128
	// Llama 2's vocabulary size: token ids stay in [0, 32000).
	defaultVocabSize = 32000
	// About 60% of the ~800 requests: exactly one flush happens mid-run, with cache state to drop
	// before it and a cold cache to refill after it.
	defaultFlushEvery = 480
)

// Bounds on a synthetic configuration: they keep a mistyped flag from asking for more memory than
// the machine has, and every intermediate product in int64.
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
	// a flush after every FlushEvery requests (none after the last); 0 = never
	FlushEvery int
}

// DefaultSyntheticConfig returns the workload `make run` replays; see the default constants for the
// sizing.
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

// Validate checks every field against its bound; the error is the *errscope.ConfigError of the
// field's flag.
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
			return &errscope.ConfigError{
				Flag:   c.name,
				Reason: fmt.Sprintf("%d, want %d..%d", c.value, c.min, c.max),
			}
		}
	}
	if tokens := cfg.worstCaseTokens(); tokens > syntheticTotalTokensMax {
		return &errscope.ConfigError{
			Flag: "conversations",
			Reason: fmt.Sprintf("up to %d prompt tokens in all, above the bound of %d: "+
				"lower conversations, turns-max or the token counts", tokens, syntheticTotalTokensMax),
		}
	}
	return nil
}

// worstCaseTokens bounds the prompt tokens of the whole workload: every conversation takes TurnsMax
// turns and every segment its longest length. The field bounds keep it inside int64.
func (cfg SyntheticConfig) worstCaseTokens() int64 {
	turnsMax := int64(cfg.TurnsMax)
	perTurn := int64(segmentTokensMax(cfg.TurnTokens) + segmentTokensMax(cfg.OutputTokens))
	longestPrompt := int64(cfg.SystemPromptTokens) + turnsMax*perTurn
	return int64(cfg.Conversations) * turnsMax * longestPrompt
}

// segmentTokensMax is the longest a segment of nominal length n can be drawn (see
// drawSegmentTokens).
func segmentTokensMax(n int) int { return n + n/2 }

// GenerateSynthetic returns the synthetic workload of cfg. It is a pure function of cfg: the same
// cfg gives the identical events on every rank, machine and Go version, because it uses only
// integer arithmetic and its own PRNG. Conversations interleave in a seeded order; turn t's prompt
// is turn t-1's prompt, then turn t-1's reply (generated from (seed, conversation, turn), as a chat
// history would hold it), then new user tokens. The rid of conversation c's turn t is "c<c>.t<t>".
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

// Streams of the PRNG: each decision draws from its own stream, so changing one (say the schedule)
// leaves the others (the token contents) as they were.
const (
	streamConversation uint64 = iota + 1
	streamSchedule
	streamSystemPrompt
	streamTurn
	streamBlock // a Mooncake block's tokens (BlockPrompt.AppendTokens)
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

// interleave returns the order in which conversations take turns: conversation c appears
// convs[c].turns times, in a seeded shuffle (Fisher-Yates), so users' turns interleave as requests
// from many users would.
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
	// The next turn's prompt holds this one's reply; the history is a copy so req.InputIDs stays
	// unshared.
	history := make([]int32, len(prompt), len(prompt)+outputTokens)
	copy(history, prompt)
	conv.history = appendTokens(history, &rng, outputTokens, cfg.VocabSize)
	conv.turn++
	return req
}

// systemPromptTokens returns system prompt i: its tokens depend only on (seed, i).
func systemPromptTokens(cfg SyntheticConfig, i int) []int32 {
	rng := newSplitMix(streamKey(cfg.Seed, streamSystemPrompt, uint64(i), 0))
	return appendTokens(
		make([]int32, 0, cfg.SystemPromptTokens),
		&rng,
		cfg.SystemPromptTokens,
		cfg.VocabSize,
	)
}

// drawSegmentTokens draws a length in [n/2, n+n/2]: real turns vary in length, and varied lengths
// put page boundaries at varied offsets in the prompts.
func drawSegmentTokens(rng *splitMix, n int) int {
	low := n / 2
	return low + int(rng.below(uint64(segmentTokensMax(n)-low+1)))
}

// appendTokens draws n token ids in [0, vocabSize). Every rank expands every request's tokens, so
// this is on each rank's path: the id is the high word of next() * vocabSize (Lemire's
// multiply-shift), not next() % vocabSize, whose 64-bit division made token expansion 8% of an
// L2-only replay's CPU. The draws are the stream's next n, four at a time: the k-th draw is
// Mix64(state + k*increment), so four of them are independent chains the CPU overlaps, and the
// slice grows once (the one-draw loop took 6% of an L2-only replay's CPU).
func appendTokens(tokens []int32, rng *splitMix, n, vocabSize int) []int32 {
	v := uint64(vocabSize)
	start := len(tokens)
	tokens = slices.Grow(tokens, n)[:start+n]
	dst, s, inc := tokens[start:], rng.state, uint64(
		splitMixIncrement,
	) // inc: a variable, so k*inc wraps
	i := 0
	for ; i+4 <= n; i += 4 {
		d := dst[i : i+4 : i+4]
		h0, _ := bits.Mul64(pool.Mix64(s+inc), v)
		h1, _ := bits.Mul64(pool.Mix64(s+2*inc), v)
		h2, _ := bits.Mul64(pool.Mix64(s+3*inc), v)
		h3, _ := bits.Mul64(pool.Mix64(s+4*inc), v)
		d[0], d[1], d[2], d[3] = int32(h0), int32(h1), int32(h2), int32(h3)
		s += 4 * inc
	}
	rng.state = s
	for ; i < n; i++ {
		id, _ := bits.Mul64(rng.next(), v)
		dst[i] = int32(id)
	}
	return tokens
}

// zipf draws ranks 0..n-1 with probability proportional to 1/(rank+1), in integer arithmetic so the
// draw is the same on every platform (a float64 CDF could differ where the compiler fuses
// multiply-adds).
type zipf struct{ cumulative []uint64 }

// zipfScale makes 1/(rank+1) an integer weight: with at most 2^16 ranks the smallest weight is
// still 2^16.
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

// splitMix is splitmix64 (Steele, Lea and Flood 2014): a tiny PRNG with a fixed, documented output
// sequence, unlike math/rand's global state.
type splitMix struct{ state uint64 }

func newSplitMix(seed uint64) splitMix { return splitMix{state: seed} }

// splitMixIncrement is the Weyl step between two states of the stream.
const splitMixIncrement = 0x9e3779b97f4a7c15

func (s *splitMix) next() uint64 {
	s.state += splitMixIncrement
	return pool.Mix64(s.state)
}

// below returns a value in [0, n), n > 0. The modulo bias is below n/2^64: irrelevant for a
// workload.
func (s *splitMix) below(n uint64) uint64 { return s.next() % n }

// streamKey derives the seed of one PRNG stream from the workload seed and the stream's
// coordinates.
func streamKey(seed, stream, a, b uint64) uint64 {
	return pool.Mix64(
		pool.Mix64(pool.Mix64(seed^pool.Mix64(stream))^a) ^ pool.Mix64(b+0x632be59bd9b4e019),
	)
}
