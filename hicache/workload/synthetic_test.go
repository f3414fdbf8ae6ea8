package workload

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strings"
	"testing"
)

// These tests are pure functions of their inputs: every rank of an SPMD run computes the same
// thing.

// smallSyntheticConfig is a workload small enough to check exhaustively in every test.
func smallSyntheticConfig() SyntheticConfig {
	cfg := DefaultSyntheticConfig()
	cfg.Conversations = 40
	cfg.TurnsMax = 5
	cfg.SystemPromptTokens = 64
	cfg.TurnTokens = 24
	cfg.OutputTokens = 16
	cfg.FlushEvery = 0
	return cfg
}

func mustGenerate(t testing.TB, cfg SyntheticConfig) []Event {
	t.Helper()
	events, err := GenerateSynthetic(cfg)
	if err != nil {
		t.Fatalf("GenerateSynthetic(%+v): %v", cfg, err)
	}
	return events
}

func eventsEqual(a, b []Event) bool {
	return slices.EqualFunc(a, b, func(x, y Event) bool {
		bx, by := x.Request.Blocks, y.Request.Blocks
		return x.Flush == y.Flush && x.Request.RID == y.Request.RID && x.Request.OutputLen == y.Request.OutputLen &&
			slices.Equal(x.Request.InputIDs, y.Request.InputIDs) && slices.Equal(bx.HashIDs, by.HashIDs) &&
			bx.InputTokens == by.InputTokens &&
			bx.BlockTokens == by.BlockTokens
	})
}

// firstDifference describes where two event streams part, for failure messages.
func firstDifference(a, b []Event) string {
	for i := range min(len(a), len(b)) {
		if !eventsEqual(a[i:i+1], b[i:i+1]) {
			return fmt.Sprintf("event %d: %+v != %+v", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d != %d", len(a), len(b))
}

func requestsOf(events []Event) []Request {
	var requests []Request
	for _, e := range events {
		if !e.Flush {
			requests = append(requests, e.Request)
		}
	}
	return requests
}

// parseRIDForTest splits "c<conv>.t<turn>".
func parseRIDForTest(t *testing.T, rid string) (conv, turn int) {
	t.Helper()
	if _, err := fmt.Sscanf(rid, "c%d.t%d", &conv, &turn); err != nil ||
		rid != fmt.Sprintf("c%d.t%d", conv, turn) {
		t.Fatalf("rid %q is not c<conv>.t<turn>", rid)
	}
	return conv, turn
}

func TestGenerateSyntheticSameSeedGivesIdenticalEvents(t *testing.T) {
	cfg := smallSyntheticConfig()
	a, b := mustGenerate(t, cfg), mustGenerate(t, cfg)
	if !eventsEqual(a, b) {
		t.Fatalf("two runs of one config differ: %s", firstDifference(a, b))
	}
	cfg.Seed++
	if c := mustGenerate(t, cfg); eventsEqual(a, c) {
		t.Fatal("seeds 1 and 2 gave identical workloads")
	}
}

// The default workload is pinned by a digest of its broadcast form: it must be the same on every
// machine and Go version (integer arithmetic, own PRNG). If you change the generator on purpose,
// update the digest.
func TestDefaultSyntheticWorkloadIsPinned(t *testing.T) {
	// token ids by multiply-shift since 2026-12 (was 0x9a058379e59f8dad by modulo)
	const wantDigest = 0xbcf5696d0dccb7b2
	h := fnv.New64a()
	h.Write(EncodeEvents(mustGenerate(t, DefaultSyntheticConfig())))
	if got := h.Sum64(); got != wantDigest {
		t.Errorf("default workload digest %#x, want %#x", got, uint64(wantDigest))
	}
}

// The default must stay within what one CP group of 8 oversubscribed ranks replays quickly, and
// must flush mid-run (the sizing comments on the default constants).
func TestDefaultSyntheticWorkloadSize(t *testing.T) {
	events := mustGenerate(t, DefaultSyntheticConfig())
	requests, longestPrompt := 0, 0
	var flushesAt []int
	for _, e := range events {
		if e.Flush {
			flushesAt = append(flushesAt, requests)
			continue
		}
		requests++
		longestPrompt = max(longestPrompt, len(e.Request.InputIDs))
	}
	if requests < 600 || requests > 1000 {
		t.Errorf("%d requests, want 600..1000", requests)
	}
	if longestPrompt < 2048 || longestPrompt > 4096 {
		t.Errorf("longest prompt %d tokens, want 2048..4096", longestPrompt)
	}
	if len(flushesAt) != 1 || flushesAt[0] < requests/4 || flushesAt[0] > requests*3/4 {
		t.Errorf("flushes after requests %v of %d, want one mid-run", flushesAt, requests)
	}
}

func TestGenerateSyntheticTurnsExtendThePreviousTurnAndReply(t *testing.T) {
	cfg := smallSyntheticConfig()
	previous := map[int]Request{}   // conversation -> its latest turn
	turnsSeen := map[int][]string{} // conversation -> the rids of its turns so far
	for _, r := range requestsOf(mustGenerate(t, cfg)) {
		conv, turn := parseRIDForTest(t, r.RID)
		prev, seen := previous[conv]
		if wantTurn := len(turnsSeen[conv]); turn != wantTurn {
			t.Fatalf("%s arrives when turn %d is due", r.RID, wantTurn)
		}
		turnsSeen[conv] = append(turnsSeen[conv], r.RID)
		if seen {
			historyLen := len(prev.InputIDs) + int(prev.OutputLen)
			userTokens := len(r.InputIDs) - historyLen
			if !slices.Equal(r.InputIDs[:len(prev.InputIDs)], prev.InputIDs) {
				t.Fatalf("%s does not start with %s's prompt", r.RID, prev.RID)
			}
			if userTokens < cfg.TurnTokens/2 || userTokens > segmentTokensMax(cfg.TurnTokens) {
				t.Fatalf(
					"%s adds %d user tokens after %s's reply, want %d..%d",
					r.RID,
					userTokens,
					prev.RID,
					cfg.TurnTokens/2,
					segmentTokensMax(cfg.TurnTokens),
				)
			}
		}
		if r.OutputLen < int32(cfg.OutputTokens/2) ||
			r.OutputLen > int32(segmentTokensMax(cfg.OutputTokens)) {
			t.Fatalf("%s output_len %d, want %d..%d", r.RID, r.OutputLen, cfg.OutputTokens/2,
				segmentTokensMax(cfg.OutputTokens))
		}
		previous[conv] = r
	}
}

// The reply a turn's successor holds is a pure function of (seed, conversation, turn): a different
// schedule (another FlushEvery) must not change it.
func TestGenerateSyntheticRepliesDependOnlyOnConversationAndTurn(t *testing.T) {
	cfg := smallSyntheticConfig()
	plain := requestsOf(mustGenerate(t, cfg))
	cfg.FlushEvery = 7
	flushed := requestsOf(mustGenerate(t, cfg))
	if !eventsEqual(requestEvents(plain), requestEvents(flushed)) {
		t.Fatal("inserting flushes changed the requests")
	}
}

func requestEvents(requests []Request) []Event {
	events := make([]Event, len(requests))
	for i, r := range requests {
		events[i] = Event{Request: r}
	}
	return events
}

func TestGenerateSyntheticInterleavesConversations(t *testing.T) {
	requests := requestsOf(mustGenerate(t, smallSyntheticConfig()))
	switches := 0
	for i := 1; i < len(requests); i++ {
		a, _ := parseRIDForTest(t, requests[i-1].RID)
		b, _ := parseRIDForTest(t, requests[i].RID)
		if a != b {
			switches++
		}
	}
	// Back-to-back conversations would switch 39 times; a shuffle switches on nearly every request.
	if switches < len(requests)/2 {
		t.Fatalf(
			"%d conversation switches in %d requests: not interleaved",
			switches,
			len(requests),
		)
	}
}

func TestGenerateSyntheticSystemPromptPopularityIsSkewed(t *testing.T) {
	cfg := DefaultSyntheticConfig()
	prompts := make(map[string]int) // system prompt index by its tokens
	for i := range cfg.SystemPrompts {
		prompts[fmt.Sprint(systemPromptTokens(cfg, i))] = i
	}
	counts := make([]int, cfg.SystemPrompts)
	for _, r := range requestsOf(mustGenerate(t, cfg)) {
		if _, turn := parseRIDForTest(t, r.RID); turn != 0 {
			continue
		}
		i, ok := prompts[fmt.Sprint(r.InputIDs[:cfg.SystemPromptTokens])]
		if !ok {
			t.Fatalf("%s does not start with a system prompt", r.RID)
		}
		counts[i]++
	}
	// Zipf over 8 prompts gives the first 37% of conversations and the last 5%.
	if counts[0] < cfg.Conversations/4 || counts[0] < 3*counts[len(counts)-1] {
		t.Fatalf(
			"conversations per system prompt %v: want the first prompt far more popular",
			counts,
		)
	}
}

func TestGenerateSyntheticTokenIDsInVocabulary(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.VocabSize = 5
	for _, r := range requestsOf(mustGenerate(t, cfg)) {
		for _, id := range r.InputIDs {
			if id < 0 || int(id) >= cfg.VocabSize {
				t.Fatalf("%s holds token %d outside [0, %d)", r.RID, id, cfg.VocabSize)
			}
		}
	}
}

func TestGenerateSyntheticFlushesEveryNRequests(t *testing.T) {
	cfg := smallSyntheticConfig()
	cfg.FlushEvery = 10
	events := mustGenerate(t, cfg)
	requests := 0
	for i, e := range events {
		if !e.Flush {
			requests++
			continue
		}
		if requests%10 != 0 || i == len(events)-1 {
			t.Fatalf("flush at event %d after %d requests", i, requests)
		}
	}
	if want := flushCount(requests, 10); len(events)-requests != want || want < 2 {
		t.Fatalf("%d flushes in %d requests, want %d", len(events)-requests, requests, want)
	}
	// A flush after the last request would flush nothing that is ever read again: there is none.
	cfg.FlushEvery = requests
	if events := mustGenerate(t, cfg); len(events) != requests {
		t.Fatalf(
			"flush-every %d: %d events for %d requests, want no flush",
			requests,
			len(events),
			requests,
		)
	}
}

func TestSyntheticConfigValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		field string
		edit  func(*SyntheticConfig)
	}{
		{"conversations", func(c *SyntheticConfig) { c.Conversations = 0 }},
		{"turns-max", func(c *SyntheticConfig) { c.TurnsMax = -1 }},
		{"system-prompts", func(c *SyntheticConfig) { c.SystemPrompts = 1 << 17 }},
		{"turn-tokens", func(c *SyntheticConfig) { c.TurnTokens = 0 }},
		{"output-tokens", func(c *SyntheticConfig) { c.OutputTokens = -1 }},
		{"vocab-size", func(c *SyntheticConfig) { c.VocabSize = 0 }},
		{"flush-every", func(c *SyntheticConfig) { c.FlushEvery = -1 }},
		{"prompt tokens in all", func(c *SyntheticConfig) { c.Conversations, c.TurnsMax = 1<<20, 1<<10 }},
	} {
		cfg := DefaultSyntheticConfig()
		tc.edit(&cfg)
		if _, err := GenerateSynthetic(cfg); err == nil ||
			!strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: error %v, want one naming %q", tc.field, err, tc.field)
		}
	}
}

func BenchmarkGenerateSyntheticDefault(b *testing.B) {
	for b.Loop() {
		mustGenerate(b, DefaultSyntheticConfig())
	}
}

// TestAppendTokensIsTheStreamsNextDraws holds the four-at-a-time appendTokens to the one-draw loop
// it replaces, for every remainder, after a prefix the slice already holds, and checks that the
// stream goes on from the same state.
func TestAppendTokensIsTheStreamsNextDraws(t *testing.T) {
	for n := range 11 {
		for _, vocab := range []int{1, 7, 32000, 1 << 31} {
			fast, slow := newSplitMix(uint64(n)*977+3), newSplitMix(uint64(n)*977+3)
			got := appendTokens([]int32{-1, -2}, &fast, n, vocab)
			want := []int32{-1, -2}
			for range n {
				id, _ := bits.Mul64(slow.next(), uint64(vocab))
				want = append(want, int32(id))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("n %d vocab %d: got %v, want %v", n, vocab, got, want)
			}
			if fast.next() != slow.next() {
				t.Fatalf(
					"n %d vocab %d: the stream does not go on from where the draws left it",
					n,
					vocab,
				)
			}
		}
	}
}

// BenchmarkAppendTokens draws one 512-token Mooncake block, as ExpandEvents does for every block of
// a trace.
func BenchmarkAppendTokens(b *testing.B) {
	buf := make([]int32, 0, 512)
	rng := newSplitMix(1)
	b.SetBytes(512 * 4)
	for b.Loop() {
		buf = appendTokens(buf[:0], &rng, 512, 32000)
	}
}
