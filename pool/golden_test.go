package pool

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite pool/testdata/*.txt with the actual output")

// TestGoldenScenarios runs the command files in testdata, in the style of etcd raft's interaction tests:
// each block is a command line, a "----" line and the expected output, separated by blank lines; lines
// starting with # are comments. `go test ./pool -run Golden -update` rewrites the expected outputs.
func TestGoldenScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario files: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) { runScenarioFile(t, file) })
	}
}

func runScenarioFile(t *testing.T, file string) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	var out strings.Builder
	var a *Allocator
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
		actual := runScenarioCommand(t, &a, line)
		if !*update && strings.Join(expected, "\n") != actual {
			t.Errorf("%s: %s\nexpected:\n%s\nactual:\n%s", file, line, strings.Join(expected, "\n"), actual)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", line, actual)
	}
	if *update {
		if err := os.WriteFile(file, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// scenarioArgs parses "key=value" words.
func scenarioArgs(t *testing.T, words []string) map[string]uint64 {
	args := map[string]uint64{}
	for _, word := range words {
		key, value, ok := strings.Cut(word, "=")
		n, err := strconv.ParseUint(value, 10, 64)
		if !ok || err != nil {
			t.Fatalf("bad argument %q", word)
		}
		args[key] = n
	}
	return args
}

func runScenarioCommand(t *testing.T, a **Allocator, line string) string {
	words := strings.Fields(line)
	args := scenarioArgs(t, words[1:])
	id := ObjectID(args["id"])
	if words[0] == "new" {
		// Slots of 4 bytes (2 ranks x 1 layer x K,V x 1 byte), so slab_slots sets SlabBytesMax directly.
		g := Geometry{CPSize: 2, Layers: 1, PayloadsPerLayer: 2, PageTokens: 1, TokenBytes: 1, Slots: int(args["slots"]),
			SlabBytesMax: 4 * int64(args["slab_slots"]), MaxObjects: int(args["max_objects"])}
		var err error
		if *a, err = New(g); err != nil {
			return "error: " + err.Error()
		}
		return scenarioState(*a)
	}
	var err error
	switch words[0] {
	case "reserve":
		seq, ok := args["seq"]
		if !ok {
			seq = args["clock"]
		}
		outcome, err := (*a).Reserve(id, int(args["pages"]), seq, args["clock"])
		if err != nil {
			return "error: " + err.Error()
		}
		result := outcome.String()
		if evicted := (*a).Evicted(); len(evicted) > 0 {
			result += fmt.Sprintf(" evicted=%v", evicted)
		}
		if extents, ok := (*a).Extents(id); ok {
			result += " " + formatExtents(extents)
		}
		return result
	case "commit":
		err = (*a).MarkObjectCommitted(id)
	case "release":
		err = (*a).Release(id)
	case "abort":
		err = (*a).Abort(id)
	case "evict":
		err = (*a).Evict(id)
	case "touch":
		err = (*a).Touch(id, args["clock"])
	case "protect":
		err = (*a).Protect(id)
	case "unprotect":
		err = (*a).Unprotect(id)
	case "reset":
		(*a).Reset()
	case "perturb":
		(*a).Perturb()
	case "state":
		return scenarioState(*a)
	default:
		t.Fatalf("unknown command %q", line)
	}
	if err != nil {
		return "error: " + err.Error()
	}
	if cerr := (*a).CheckInvariants(); cerr != nil {
		return "invariant broken: " + cerr.Error()
	}
	return "ok"
}

// formatExtents writes extents as slab:[first,limit) ranges.
func formatExtents(extents []Extent) string {
	parts := make([]string, len(extents))
	for i, e := range extents {
		parts[i] = fmt.Sprintf("%d:[%d,%d)", e.Slab, e.FirstSlot, e.FirstSlot+e.Slots)
	}
	return strings.Join(parts, " ")
}

// scenarioState prints the free slots per slab, every object in id order and whether the digest is fresh.
func scenarioState(a *Allocator) string {
	var b strings.Builder
	fmt.Fprintf(&b, "slots=%d free=%d slabs:", a.geometry.Slots, a.FreeSlots())
	for slab := range a.geometry.SlabCount() {
		fmt.Fprintf(&b, " %d/%d", a.FreeSlotsInSlab(slab), a.geometry.SlabSlots(slab))
	}
	var ids []ObjectID
	for index := range a.table.highWater {
		if r := a.table.records[index]; r.live {
			ids = append(ids, r.id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		info, _ := a.Lookup(id)
		extents, _ := a.Extents(id)
		fmt.Fprintf(&b, "\nobject %d: pages=%d clock=%d committed=%v refs=%d %s", id, info.Pages, info.Clock, info.Committed, info.Refs, formatExtents(extents))
	}
	fmt.Fprintf(&b, "\ndigest fresh=%v", a.Digest() == a.FreshDigest())
	if err := a.CheckInvariants(); err != nil {
		fmt.Fprintf(&b, "\ninvariant broken: %v", err)
	}
	return b.String()
}
