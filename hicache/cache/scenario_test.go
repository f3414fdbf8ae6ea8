package cache

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/cockroachdb/datadriven"

	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/pool"
)

// TestScenarios runs the command files in testdata through a one-rank core (soloEnv) on
// cockroachdb/datadriven, as etcd raft's interaction tests and pool's TestGoldenScenarios do: each
// block is a command line, a "----" line and the expected output, blocks separated by blank lines;
// lines starting with # are comments. A request is written as letters, one a page (page "a" is
// tokens 1 1, "b" 2 2, ...), so that "abc" and "abd" share the prefix "ab". Commands:
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
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		s := &scenario{t: t}
		datadriven.RunTest(
			t,
			path,
			func(_ *testing.T, d *datadriven.TestData) string { return s.run(d) },
		)
	})
}

// scenario is one file's core and its Env.
type scenario struct {
	t   *testing.T
	c   *Core
	env *soloEnv
}

const scenarioPageTokens = 2

func (s *scenario) run(d *datadriven.TestData) string {
	if d.Cmd != "new" && s.c == nil {
		d.Fatalf(s.t, "%s before new", d.Cmd)
	}
	var out strings.Builder
	switch d.Cmd {
	case "new":
		s.build(d, &out)
	case "step", "flush":
		var batch []workload.Event
		if d.Cmd == "flush" {
			batch = []workload.Event{{Flush: true}}
		}
		for _, arg := range d.CmdArgs {
			if len(arg.Vals) > 0 {
				d.Fatalf(s.t, "request %s: a request is letters, not key=value", arg)
			}
			batch = append(
				batch,
				workload.Event{
					Request: workload.Request{InputIDs: scenarioTokens(s.t, d, arg.Key)},
				},
			)
		}
		s.step(batch, &out)
	case "complete":
		var seq uint64
		d.ScanArgs(s.t, "seq", &seq)
		fmt.Fprintf(&out, "released %v\n", s.env.release(seq))
	case "evict":
		var pages int
		d.ScanArgs(s.t, "pages", &pages)
		s.evict(pages, &out)
	case "state":
		s.state(&out)
	case "digest":
		fmt.Fprintf(
			&out,
			"digest %#016x fresh %v\n",
			s.c.alloc.Digest(),
			s.c.alloc.StateHash() == s.c.freshStateHash,
		)
	default:
		d.Fatalf(s.t, "unknown command %q", d.Cmd)
	}
	if out.Len() == 0 {
		return "ok"
	}
	return out.String()
}

func (s *scenario) build(d *datadriven.TestData, out *strings.Builder) {
	policy, name := WriteThrough, ""
	if d.MaybeScanArgs(s.t, "policy", &name) {
		p, err := ParseWritePolicy(name)
		if err != nil {
			d.Fatalf(s.t, "%v", err)
		}
		policy = p
	}
	var slots, devicePages int
	d.ScanArgs(s.t, "slots", &slots)
	d.ScanArgs(s.t, "device-pages", &devicePages)
	hold := d.HasArg("hold")
	g := pool.Geometry{
		CPSize:           1,
		Layers:           1,
		PayloadsPerLayer: 1,
		PageTokens:       scenarioPageTokens,
		TokenBytes:       8,
		Slots:            slots,
		SlabBytesMax:     1 << 20,
		Layout:           pool.LayerFirst,
	}
	cfg := Config{Geometry: g, DevicePages: devicePages, Policy: policy, Seed: 3,
		Testing: Testing{CheckInvariants: true, CheckEvictions: true}}
	s.c, s.env = newSoloEnv(s.t, cfg)
	s.env.holdBackups = hold
	fmt.Fprintf(out, "L1 %d pages, L2 %d slots of %d tokens, %s, backups held: %v\n",
		cfg.DevicePages, g.Slots, g.PageTokens, policy, hold)
}

// step runs one step of the program and prints each request's outcome and what else the step
// changed.
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
		fmt.Fprintf(out, "%s: L1 hit %d, L2 hit %d, computed %d\n",
			scenarioLetters(e.Request.InputIDs), o.L1Hit, o.L2Hit, o.Computed)
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
	fmt.Fprintf(out, "chose [%s]: %d pages freed, %d leaving when their backups commit\n",
		strings.Join(names, " "), freed, backedUp)
	if s.c.failure != nil {
		fmt.Fprintf(out, "failure: %v\n", s.c.failure)
	}
}

// state prints the tree in walk order (a node by its path, its L1 pages, its L2 object) and the
// rest.
func (s *scenario) state(out *strings.Builder) {
	s.c.tree.forEach(func(n *treeNode) {
		fmt.Fprintf(out, "%s: L1 %v L2 %d+%d last access %d\n",
			scenarioPath(n), n.devicePages, n.l2, n.l2Offset, n.lastAccess)
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
	fmt.Fprintf(
		out,
		"device: %d of %d pages free; L2: %d of %d slots free; copies in flight %v, held %v\n",
		s.c.dev.available(),
		s.c.dev.capacity(),
		s.c.alloc.FreeSlots(),
		s.c.geometry().Slots,
		inFlight,
		held,
	)
}

// counterDelta names the counters a step changed, but those every step changes or each request's
// line gives.
func counterDelta(before, after Counters) string {
	skip := []string{
		"Requests",
		"L1HitTokens",
		"L2HitTokens",
		"MissTokens",
		"IdealHitTokens",
		"ConsensusCalls",
		"ConsensusStepCalls",
		"ConsensusSkipped",
		"BytesD2H",
		"BytesH2D",
	}
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
		if unicode.IsUpper(r) && i > 0 &&
			(unicode.IsLower(rune(name[i-1])) || unicode.IsDigit(rune(name[i-1]))) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// scenarioTokens reads a request: a page a letter.
func scenarioTokens(t *testing.T, d *datadriven.TestData, word string) []int32 {
	var tokens []int32
	for _, r := range word {
		if r < 'a' || r > 'z' {
			d.Fatalf(t, "request %q: pages are letters a to z", word)
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
