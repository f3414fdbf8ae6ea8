package cache

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

var rewrite = flag.Bool("rewrite", false, "rewrite hicache/cache/testdata/*.txt with the actual output")

// TestScenarios runs the command files in testdata through a one-rank core (soloEnv), in the style of etcd raft's
// interaction tests and pool's TestGoldenScenarios: each block is a command line, a "----" line and the expected
// output, blocks separated by blank lines; lines starting with # are comments. A request is written as letters,
// one a page (page "a" is tokens 1 1, "b" 2 2, ...), so that "abc" and "abd" share the prefix "ab". Commands:
//
//	new device-pages=N slots=N [policy=write_through|write_through_selective|write_back] [hold]
//	step REQUEST...   one step of the step program: the requests, the step consensus, what it committed
//	flush             a step whose event is a flush
//	complete seq=N    (with hold) a held backup's completion is delivered; seq=0 delivers every one
//	evict pages=N     one L1 eviction of N pages, outside a step: the nodes it chose, in order
//	state             the tree, the device pages, the L2 and the copies in flight
//	digest            the allocator's digest and whether the state is a fresh one's
//
// `go test ./hicache/cache -run Scenarios -rewrite` rewrites the expected outputs.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenario(t, file) })
	}
}

func runScenario(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out strings.Builder
	s := &scenario{t: t}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if line == "" || strings.HasPrefix(line, "#") {
			out.WriteString(line + "\n")
			continue
		}
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", file, i+1, line)
		}
		var expected []string
		for i += 2; i < len(lines) && lines[i] != ""; i++ {
			expected = append(expected, lines[i])
		}
		actual := strings.TrimRight(s.run(line), "\n")
		if !*rewrite && strings.Join(expected, "\n") != actual {
			t.Errorf("%s: %s\nexpected:\n%s\nactual:\n%s", file, line, strings.Join(expected, "\n"), actual)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", line, actual)
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scenario is one file's core and its Env.
type scenario struct {
	t   *testing.T
	c   *Core
	env *soloEnv
}

const scenarioPageTokens = 2

func (s *scenario) run(line string) string {
	words := strings.Fields(line)
	if words[0] != "new" && s.c == nil {
		s.t.Fatalf("%q before new", line)
	}
	var out strings.Builder
	switch words[0] {
	case "new":
		s.build(words[1:], &out)
	case "step", "flush":
		var batch []workload.Event
		if words[0] == "flush" {
			batch = []workload.Event{{Flush: true}}
		}
		for _, word := range words[1:] {
			batch = append(batch, workload.Event{Request: workload.Request{InputIDs: scenarioTokens(s.t, word)}})
		}
		s.step(batch, &out)
	case "complete":
		seq := scenarioArg(s.t, words[1:], "seq")
		fmt.Fprintf(&out, "released %v\n", s.env.release(seq))
	case "evict":
		s.evict(int(scenarioArg(s.t, words[1:], "pages")), &out)
	case "state":
		s.state(&out)
	case "digest":
		fmt.Fprintf(&out, "digest %#016x fresh %v\n", s.c.alloc.Digest(), s.c.alloc.StateHash() == s.c.freshStateHash)
	default:
		s.t.Fatalf("unknown command %q", line)
	}
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

func (s *scenario) build(args []string, out *strings.Builder) {
	policy, hold := WriteThrough, false
	var rest []string
	for _, a := range args {
		switch {
		case a == "hold":
			hold = true
		case strings.HasPrefix(a, "policy="):
			p, err := ParseWritePolicy(strings.TrimPrefix(a, "policy="))
			if err != nil {
				s.t.Fatal(err)
			}
			policy = p
		default:
			rest = append(rest, a)
		}
	}
	g := pool.Geometry{CPSize: 1, Layers: 1, PayloadsPerLayer: 1, PageTokens: scenarioPageTokens, TokenBytes: 8,
		Slots: int(scenarioArg(s.t, rest, "slots")), SlabBytesMax: 1 << 20, Layout: pool.LayerFirst}
	cfg := Config{Geometry: g, DevicePages: int(scenarioArg(s.t, rest, "device-pages")), Policy: policy, Seed: 3,
		Testing: Testing{CheckInvariants: true, CheckEvictions: true}}
	s.c, s.env = newSoloEnv(s.t, cfg)
	s.env.holdBackups = hold
	fmt.Fprintf(out, "L1 %d pages, L2 %d slots of %d tokens, %s, backups held: %v\n", cfg.DevicePages, g.Slots, g.PageTokens, policy, hold)
}

// step runs one step of the program and prints each request's outcome and what else the step changed.
func (s *scenario) step(batch []workload.Event, out *strings.Builder) {
	before := s.c.counters
	var outcomes []Outcome
	s.c.cfg.Testing.Served = func(o Outcome) { outcomes = append(outcomes, o) }
	err := s.c.runStep(batch)
	s.c.cfg.Testing.Served = nil
	requests := 0
	for _, e := range batch {
		if e.Flush || requests >= len(outcomes) {
			continue
		}
		o := outcomes[requests]
		requests++
		fmt.Fprintf(out, "%s: L1 hit %d, L2 hit %d, computed %d\n", scenarioLetters(e.Request.InputIDs), o.L1Hit, o.L2Hit, o.Computed)
	}
	if delta := counterDelta(before, s.c.counters); delta != "" {
		fmt.Fprintf(out, "%s\n", delta)
	}
	if err != nil {
		fmt.Fprintf(out, "error: %v\n", err)
	}
}

// evict runs one L1 eviction and names the nodes it chose.
func (s *scenario) evict(pages int, out *strings.Builder) {
	var chosen []*treeNode
	model := s.c.evictionModel
	s.c.evictionModel = func(c *Core) evictionCheck {
		check := model(c)
		return func(nodes []*treeNode, freed, need int) error {
			chosen = nodes
			return check(nodes, freed, need)
		}
	}
	freed, backedUp := s.c.evictL1(pages)
	s.c.evictionModel = model
	var names []string
	for _, n := range chosen {
		names = append(names, scenarioPath(n))
	}
	fmt.Fprintf(out, "chose [%s]: %d pages freed, %d leaving when their backups commit\n", strings.Join(names, " "), freed, backedUp)
	if s.c.failure != nil {
		fmt.Fprintf(out, "failure: %v\n", s.c.failure)
	}
}

// state prints the tree in walk order (a node by its path, its L1 pages, its L2 object) and the rest.
func (s *scenario) state(out *strings.Builder) {
	s.c.tree.forEach(func(n *treeNode) {
		fmt.Fprintf(out, "%s: L1 %v L2 %d+%d last access %d\n", scenarioPath(n), n.devicePages, n.l2, n.l2Offset, n.lastAccess)
	})
	var held []uint64
	for _, x := range s.env.held {
		held = append(held, x.Seq)
	}
	var inFlight []uint64
	for seq := range s.c.inFlight {
		inFlight = append(inFlight, seq)
	}
	slices.Sort(inFlight)
	fmt.Fprintf(out, "device: %d of %d pages free; L2: %d of %d slots free; copies in flight %v, held %v\n",
		s.c.dev.available(), s.c.dev.capacity(), s.c.alloc.FreeSlots(), s.c.geometry().Slots, inFlight, held)
}

// counterDelta names the counters a step changed, but those every step changes or each request's line gives.
func counterDelta(before, after Counters) string {
	skip := []string{"Requests", "L1HitTokens", "L2HitTokens", "MissTokens", "IdealHitTokens", "ConsensusCalls",
		"ConsensusStepCalls", "ConsensusSkipped", "BytesD2H", "BytesH2D"}
	var parts []string
	b, a := reflect.ValueOf(before), reflect.ValueOf(after)
	for i := range a.NumField() {
		name := a.Type().Field(i).Name
		if d := a.Field(i).Int() - b.Field(i).Int(); d != 0 && !slices.Contains(skip, name) {
			parts = append(parts, fmt.Sprintf("%s %+d", snakeCase(name), d))
		}
	}
	return strings.Join(parts, ", ")
}

func snakeCase(name string) string {
	var b strings.Builder
	for i, r := range name {
		if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rune(name[i-1])) || unicode.IsDigit(rune(name[i-1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// scenarioTokens reads a request: a page a letter.
func scenarioTokens(t *testing.T, word string) []int32 {
	var tokens []int32
	for _, r := range word {
		if r < 'a' || r > 'z' {
			t.Fatalf("request %q: pages are letters a to z", word)
		}
		for range scenarioPageTokens {
			tokens = append(tokens, r-'a'+1)
		}
	}
	return tokens
}

// scenarioLetters writes tokens back as letters, one a page.
func scenarioLetters(tokens []int32) string {
	var b strings.Builder
	for i := 0; i < len(tokens); i += scenarioPageTokens {
		b.WriteRune('a' + rune(tokens[i]) - 1)
	}
	return b.String()
}

// scenarioPath names a node by its tokens from the root, the node's own after a '/'.
func scenarioPath(n *treeNode) string {
	own := scenarioLetters(n.tokens)
	prefix := ""
	for p := n.parent; p != nil; p = p.parent {
		prefix = scenarioLetters(p.tokens) + prefix
	}
	if prefix == "" {
		return own
	}
	return prefix + "/" + own
}

// scenarioArg reads key=value among words, a number.
func scenarioArg(t *testing.T, words []string, key string) uint64 {
	for _, w := range words {
		k, v, ok := strings.Cut(w, "=")
		if ok && k == key {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("bad argument %q", w)
			}
			return n
		}
	}
	t.Fatalf("missing %s= in %v", key, words)
	return 0
}
