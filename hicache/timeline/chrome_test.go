package timeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"testing"
	"time"
)

// chromeFile is the part of a Chrome trace the tests read.
type chromeFile struct {
	DisplayTimeUnit string        `json:"displayTimeUnit"`
	TraceEvents     []chromeEvent `json:"traceEvents"`
	OtherData       other         `json:"otherData"`
}

type chromeEvent struct {
	Ph   string          `json:"ph"`
	Name string          `json:"name"`
	Cat  string          `json:"cat"`
	Ts   *float64        `json:"ts"`
	Dur  *float64        `json:"dur"`
	Pid  *int            `json:"pid"`
	Tid  *int            `json:"tid"`
	Args json.RawMessage `json:"args"`
}

// twoRanks is a CP group of two ranks: a few steps each, with copies that overlap (queued behind
// each other) and an L3 read.
func twoRanks(t *testing.T) []RankRecord {
	t.Helper()
	var ranks []RankRecord
	for rank := range 2 {
		r := NewRecorder(time.Now(), Window{Steps: 10, Every: 1}, 0)
		runSteps(r, 3)
		backup := r.Name("backup")
		for i := range int64(3) { // three copies started together, run one after another
			r.Add(
				Span{
					Kind:       KindCopy,
					Name:       backup,
					Step:       2,
					StartNs:    1000,
					DurNs:      1000 * (i + 1),
					RunStartNs: 1000 * (i + 1),
					RunDurNs:   1000,
					Count:      4,
				},
			)
		}
		r.Add(
			Span{
				Kind:       KindCopy,
				Name:       backup,
				Step:       3,
				StartNs:    5000,
				DurNs:      500,
				RunStartNs: 5100,
				RunDurNs:   400,
				Count:      1,
			},
		)
		r.Add(
			Span{
				Kind:       KindL3Read,
				Step:       3,
				StartNs:    2000,
				DurNs:      3000,
				RunStartNs: 2500,
				RunDurNs:   1000,
				Count:      65536,
			},
		)
		ranks = append(ranks, r.Record(rank, 0, rank))
	}
	return ranks
}

func writeAndParse(t *testing.T, ranks []RankRecord) chromeFile {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteChrome(&buf, ranks, Info{Clock: "test"}); err != nil {
		t.Fatal(err)
	}
	var f chromeFile
	if err := json.Unmarshal(buf.Bytes(), &f); err != nil {
		t.Fatalf("the file is not JSON: %v\n%s", err, buf.String())
	}
	return f
}

// TestChromeFileShape: the JSON Object Format, every span a complete event with ts, dur, pid and
// tid, each CP group a named process and each rank a named thread, tid its world rank.
func TestChromeFileShape(t *testing.T) {
	f := writeAndParse(t, twoRanks(t))
	if f.DisplayTimeUnit != "ms" {
		t.Errorf("displayTimeUnit %q", f.DisplayTimeUnit)
	}
	names := map[string]bool{}
	spans := 0
	for _, e := range f.TraceEvents {
		if e.Pid == nil || e.Tid == nil {
			t.Fatalf("an event without pid or tid: %+v", e)
		}
		switch e.Ph {
		case "M":
			var args struct{ Name string }
			json.Unmarshal(e.Args, &args)
			names[fmt.Sprintf("%s %d %d %s", e.Name, *e.Pid, *e.Tid, args.Name)] = true
		case "X":
			spans++
			if e.Ts == nil || e.Dur == nil || *e.Dur < 0 || *e.Ts < 0 {
				t.Errorf("a span without ts or dur: %+v", e)
			}
		default:
			t.Errorf("an event of phase %q", e.Ph)
		}
	}
	// The ids are one above the group and rank: Perfetto takes pid 0 and tid 0 for the kernel's
	// idle task.
	for _, want := range []string{"process_name 1 1 CP group 0", "thread_name 1 1 rank 0 (cp rank 0)", "thread_name 1 2 rank 1 (cp rank 1)"} {
		if !names[want] {
			t.Errorf("no metadata %q in %v", want, names)
		}
	}
	// Per rank: 6 step-track spans, 4 copies and a read, each of the 5 with its run.
	if spans != 2*(6+2*5) {
		t.Errorf("%d spans, want %d", spans, 2*(6+2*5))
	}
	if len(f.OtherData.Ranks) != 2 || f.OtherData.Ranks[1].WorldRank != 1 || f.OtherData.Ranks[0].SpansKept != 11 ||
		f.OtherData.Clock != "test" ||
		f.OtherData.Window.Steps != 10 ||
		f.OtherData.Note == "" {
		t.Errorf("otherData: %+v", f.OtherData)
	}
	if got := f.OtherData.Ranks[0].TotalMs["copy/backup"]; math.Abs(got-0.0065) > 1e-12 {
		t.Errorf("copy/backup total %v ms, want 0.0065", got)
	}
}

// nsUs is a nanosecond in microseconds: the file's resolution, and the tolerance of sums of its
// times.
const nsUs = 0.001

// TestLastIntoStepConsensusNamesTheRankTheGroupWaitedFor: per step, the rank of a group that
// entered the step consensus last is counted; a group of one rank waits for nobody.
func TestLastIntoStepConsensusNamesTheRankTheGroupWaitedFor(t *testing.T) {
	record := func(rank, group int, startsNs ...int64) RankRecord {
		r := NewRecorder(time.Now(), Window{Every: 1}, 0)
		step := r.Name("step")
		for i, start := range startsNs {
			r.Add(
				Span{Kind: KindConsensus, Name: step, Step: int64(i + 1), StartNs: start, DurNs: 1},
			)
		}
		return r.Record(rank, group, rank)
	}
	ranks := []RankRecord{record(0, 0, 10, 50, 90), record(1, 0, 20, 40, 95), record(2, 1, 5, 5, 5)}
	got := lastIntoStepConsensus(ranks)
	if want := []int64{1, 2, 0}; !slices.Equal(got, want) {
		t.Errorf("last into the step consensus %v, want %v", got, want)
	}
}

// TestEveryTrackNests: on every thread, complete events nest or follow each other, as a viewer
// requires; the overlapping copies went to lanes of their own (three at once: three lanes), and the
// later copy reuses the first.
func TestEveryTrackNests(t *testing.T) {
	f := writeAndParse(t, twoRanks(t))
	byTid := map[int][]chromeEvent{}
	copyTids := map[int]map[int]bool{}
	for _, e := range f.TraceEvents {
		if e.Ph != "X" {
			continue
		}
		byTid[*e.Tid] = append(byTid[*e.Tid], e)
		if e.Cat == "copy" {
			rank := *e.Tid % 1_000_000 / 1000
			if copyTids[rank] == nil {
				copyTids[rank] = map[int]bool{}
			}
			copyTids[rank][*e.Tid] = true
		}
	}
	for tid, events := range byTid {
		sort.SliceStable(events, func(i, j int) bool {
			if *events[i].Ts != *events[j].Ts {
				return *events[i].Ts < *events[j].Ts
			}
			return *events[i].Dur > *events[j].Dur
		})
		var open []float64 // ends of the enclosing events
		for _, e := range events {
			for len(open) > 0 && open[len(open)-1] <= *e.Ts+nsUs {
				open = open[:len(open)-1]
			}
			end := *e.Ts + *e.Dur
			if len(open) > 0 && end > open[len(open)-1]+nsUs {
				t.Errorf(
					"tid %d: %q [%v, %v] overlaps its enclosing event's end %v",
					tid,
					e.Name,
					*e.Ts,
					end,
					open[len(open)-1],
				)
			}
			open = append(open, end)
		}
	}
	for rank, tids := range copyTids {
		if len(tids) != 3 {
			t.Errorf("rank %d's copies on %d lanes, want 3", rank, len(tids))
		}
	}
}

// TestAssignLanesUsesTheFewestLanes: spans that follow each other share a lane; overlapping ones do
// not.
func TestAssignLanesUsesTheFewestLanes(t *testing.T) {
	spans := []Span{
		{Kind: KindL3Write, StartNs: 0, DurNs: 10},
		{Kind: KindL3Write, StartNs: 10, DurNs: 10},
		{Kind: KindL3Write, StartNs: 5, DurNs: 20},
		{Kind: KindStep, StartNs: 0, DurNs: 100},
		{Kind: KindL3Read, StartNs: 5, DurNs: 1},
	}
	got := assignLanes(spans)
	want := []int{0, 0, 1, 0, 0}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("lanes %v, want %v", got, want)
		}
	}
}

// BenchmarkWriteChrome: world rank 0's write of a job's timeline, 8 ranks of 25,000 spans (a
// 200-step window of the shared trace's warm L3 replay), a fifth of them asynchronous.
func BenchmarkWriteChrome(b *testing.B) {
	ranks := make([]RankRecord, 8)
	for rank := range ranks {
		r := NewRecorder(time.Now(), Window{Every: 1}, 0)
		name := r.Name("step")
		for i := range int64(25_000) {
			k := KindConsensus
			if i%5 == 0 {
				k = KindL3Read
			}
			r.Add(
				Span{
					Kind:       k,
					Name:       name,
					Step:       i / 125,
					StartNs:    i * 1000,
					DurNs:      3000,
					RunStartNs: i*1000 + 500,
					RunDurNs:   100,
				},
			)
		}
		ranks[rank] = r.Record(rank, 0, rank)
	}
	var out bytes.Buffer
	b.ResetTimer()
	for range b.N {
		out.Reset()
		if err := WriteChrome(&out, ranks, Info{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(out.Len())/1e6, "MB/file")
}
