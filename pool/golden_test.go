package pool

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
)

// TestGoldenScenarios runs the command files in testdata on cockroachdb/datadriven, as etcd raft's
// interaction tests do: each block is a command line (`reserve id=1 pages=3 clock=1`), a "----"
// line and the expected output, blocks separated by blank lines; lines starting with # are
// comments. Each file starts from no allocator; `new` builds one. Every file in testdata is a
// subtest named without its .txt (-run Golden/evict); a file stops at its first wrong output, as
// what follows it runs on a state the file no longer describes. `go test ./pool -run Golden
// -rewrite` rewrites the expected outputs.
func TestGoldenScenarios(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var a *Allocator
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return runScenarioCommand(t, &a, d)
		})
	})
}

// scenarioArgs reads every key=value argument as a number; a missing one reads as 0, as a zero
// Geometry field does, so that a file names only what it sets.
func scenarioArgs(t *testing.T, d *datadriven.TestData) map[string]uint64 {
	args := map[string]uint64{}
	for _, arg := range d.CmdArgs {
		var n uint64
		d.ScanArgs(t, arg.Key, &n)
		args[arg.Key] = n
	}
	return args
}

func runScenarioCommand(t *testing.T, a **Allocator, d *datadriven.TestData) string {
	args := scenarioArgs(t, d)
	id := ObjectID(args["id"])
	if d.Cmd == "new" {
		// Slots of 4 bytes (2 ranks x 1 layer x K,V x 1 byte), so slab_slots sets SlabBytesMax
		// directly.
		g := Geometry{CPSize: 2, Layers: 1, PayloadsPerLayer: 2, PageTokens: 1, TokenBytes: 1,
			Slots: int(args["slots"]), SlabBytesMax: 4 * int64(args["slab_slots"]),
			MaxObjects: int(args["max_objects"])}
		var err error
		if *a, err = New(g); err != nil {
			return "error: " + err.Error()
		}
		return scenarioState(*a)
	}
	if *a == nil {
		d.Fatalf(t, "%s before new", d.Cmd)
	}
	var err error
	switch d.Cmd {
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
		d.Fatalf(t, "unknown command %q", d.Cmd)
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

// scenarioState prints the free slots per slab, every object in id order and whether the digest is
// fresh.
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
		fmt.Fprintf(&b, "\nobject %d: pages=%d clock=%d committed=%v refs=%d %s",
			id, info.Pages, info.Clock, info.Committed, info.Refs, formatExtents(extents))
	}
	fmt.Fprintf(&b, "\ndigest fresh=%v", a.Digest() == a.FreshDigest())
	if err := a.CheckInvariants(); err != nil {
		fmt.Fprintf(&b, "\ninvariant broken: %v", err)
	}
	return b.String()
}
