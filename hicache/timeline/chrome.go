package timeline

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// The Chrome trace: {"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}, the JSON
// Object Format of the Trace Event Format that Perfetto and chrome://tracing open. Each CP group is
// a process, each rank's step goroutine a thread, named by metadata ("M") events ("CP group G",
// "rank R (cp rank C)"). Every span is a complete ("X") event, ts and dur in microseconds since the
// job's common origin.
//
// The ids are one above the group and the rank (Pid, Tid), because Perfetto treats pid 0 and tid 0
// as the kernel's idle task (google/perfetto#394); the names say the group and the rank themselves.
//
// A thread's complete events must nest, and asynchronous work overlaps (copies queued behind each
// other, L3 reads of one prefetch in flight together). So each rank's copies, L3 reads and L3
// writes get tracks of their own, "lanes" (existence checks too: they run on the L3 read
// goroutines): a span goes to the first lane of its kind whose last span has ended, which is the
// least number of lanes that keeps every lane's spans apart (interval partitioning); the lanes a
// rank needs are the most spans of that kind it had in flight at once, which its bounded queues
// bound. Each such span holds a child "run" event, from when its worker began it to when the work
// was done: the rest of the span is its time queued (and for a read, its wait to be landed in the
// slab by the step goroutine).

// Info is what the file says beyond the spans.
type Info struct {
	Clock string // how the ranks' clocks were put on one origin
}

// maxLanes bounds the lanes of one kind on one rank (lane tids must stay inside the kind's range);
// a span that finds every lane busy goes to the last one, where it may overlap its neighbour.
const maxLanes = 999

// Pid is the process of CP group group.
func Pid(group int) int { return group + 1 }

// Tid is the thread of world rank worldRank's step track.
func Tid(worldRank int) int { return worldRank + 1 }

// asyncTid is the thread of lane lane of kind k on worldRank: a range per asynchronous kind, above
// the step tracks' tids.
func asyncTid(k Kind, worldRank, lane int) int {
	return 1_000_000*(1+int(k-KindCopy)) + worldRank*1000 + lane
}

// sortIndex orders a rank's tracks: its step track, then its lanes of copies, L3 existence checks,
// L3 reads and L3 writes.
func sortIndex(worldRank int, k Kind, lane int) int {
	if !k.Async() {
		return worldRank * 5000
	}
	return worldRank*5000 + 1000*(1+int(k-KindCopy)) + lane
}

var laneNames = map[Kind]string{
	KindCopy:    "copies",
	KindExists:  "L3 existence checks",
	KindL3Read:  "L3 reads",
	KindL3Write: "L3 writes",
}

// WriteChrome writes the ranks' timelines as one Chrome trace.
func WriteChrome(out io.Writer, ranks []RankRecord, info Info) error {
	w := &eventWriter{w: bufio.NewWriterSize(out, 1<<16), quoted: map[string][]byte{}}
	w.raw(`{"displayTimeUnit":"ms","traceEvents":[`)
	groups := map[int]bool{}
	for i := range ranks {
		rr := &ranks[i]
		pid := Pid(rr.CPGroup)
		if !groups[rr.CPGroup] {
			groups[rr.CPGroup] = true
			w.meta("process_name", pid, pid, "name", fmt.Sprintf("CP group %d", rr.CPGroup))
			w.metaInt("process_sort_index", pid, pid, rr.CPGroup)
		}
		w.meta(
			"thread_name",
			pid,
			Tid(rr.WorldRank),
			"name",
			fmt.Sprintf("rank %d (cp rank %d)", rr.WorldRank, rr.CPRank),
		)
		w.metaInt("thread_sort_index", pid, Tid(rr.WorldRank), sortIndex(rr.WorldRank, KindStep, 0))
		lanes := assignLanes(rr.Spans)
		named := map[int]bool{}
		for j, s := range rr.Spans {
			tid := Tid(rr.WorldRank)
			if s.Kind.Async() {
				tid = asyncTid(s.Kind, rr.WorldRank, lanes[j])
				if !named[tid] {
					named[tid] = true
					w.meta(
						"thread_name",
						pid,
						tid,
						"name",
						fmt.Sprintf("rank %d %s #%d", rr.WorldRank, laneNames[s.Kind], lanes[j]+1),
					)
					w.metaInt(
						"thread_sort_index",
						pid,
						tid,
						sortIndex(rr.WorldRank, s.Kind, lanes[j]),
					)
				}
			}
			w.span(rr, s, tid)
		}
	}
	w.raw(`],"otherData":`)
	other, err := json.Marshal(otherData(ranks, info))
	if err != nil {
		return err
	}
	w.raw(string(other))
	w.raw("}\n")
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}

// assignLanes gives each asynchronous span its lane (others get 0): by kind, in order of start, the
// first lane whose last span ended by then.
func assignLanes(spans []Span) []int {
	lanes := make([]int, len(spans))
	for k := KindCopy; k < kinds; k++ {
		var idx []int
		for i, s := range spans {
			if s.Kind == k {
				idx = append(idx, i)
			}
		}
		slices.SortStableFunc(
			idx,
			func(a, b int) int { return cmp.Compare(spans[a].StartNs, spans[b].StartNs) },
		)
		var laneEndNs []int64
		for _, i := range idx {
			s := spans[i]
			lane := slices.IndexFunc(laneEndNs, func(end int64) bool { return end <= s.StartNs })
			if lane < 0 {
				lane = min(len(laneEndNs), maxLanes-1)
				if lane == len(laneEndNs) {
					laneEndNs = append(laneEndNs, 0)
				}
			}
			laneEndNs[lane] = max(laneEndNs[lane], s.StartNs+s.DurNs)
			lanes[i] = lane
		}
	}
	return lanes
}

// eventWriter appends events, comma-separated, remembering the first write error.
type eventWriter struct {
	w     *bufio.Writer
	buf   []byte
	count int
	err   error
	// names as JSON strings: a file has few of them, and many spans of each
	quoted map[string][]byte
}

func (w *eventWriter) raw(s string) {
	if w.err == nil {
		_, w.err = w.w.WriteString(s)
	}
}

func (w *eventWriter) event(b []byte) {
	if w.count > 0 {
		w.raw(",\n")
	} else {
		w.raw("\n")
	}
	w.count++
	if w.err == nil {
		_, w.err = w.w.Write(b)
	}
}

func (w *eventWriter) meta(name string, pid, tid int, key, value string) {
	b := fmt.Appendf(
		w.buf[:0],
		`{"ph":"M","name":%q,"pid":%d,"tid":%d,"args":{%q:`,
		name,
		pid,
		tid,
		key,
	)
	b = appendString(b, value)
	w.buf = append(b, "}}"...)
	w.event(w.buf)
}

func (w *eventWriter) metaInt(name string, pid, tid, value int) {
	w.buf = fmt.Appendf(
		w.buf[:0],
		`{"ph":"M","name":%q,"pid":%d,"tid":%d,"args":{"sort_index":%d}}`,
		name,
		pid,
		tid,
		value,
	)
	w.event(w.buf)
}

// span writes s as a complete event, and an asynchronous span's run as a second one inside it.
func (w *eventWriter) span(rr *RankRecord, s Span, tid int) {
	b := append(w.buf[:0], `{"ph":"X","cat":`...)
	b = append(b, w.quote(s.Kind.String())...)
	b = append(b, `,"name":`...)
	if s.Kind == KindStep {
		b = appendString(b, spanName(rr, s))
	} else {
		b = append(b, w.quote(spanName(rr, s))...)
	}
	b = appendTimes(b, s.StartNs, s.DurNs, Pid(rr.CPGroup), tid)
	b = append(b, `,"args":{"step":`...)
	b = strconv.AppendInt(b, s.Step, 10)
	if key := countKey(s.Kind); key != "" {
		b = append(b, `,"`...)
		b = append(b, key...)
		b = append(b, `":`...)
		b = strconv.AppendInt(b, s.Count, 10)
	}
	if s.Kind.Async() {
		b = append(b, `,"queued_us":`...)
		b = appendUs(b, s.RunStartNs-s.StartNs)
		b = append(b, `,"run_us":`...)
		b = appendUs(b, s.RunDurNs)
	}
	w.buf = append(b, "}}"...)
	w.event(w.buf)
	if s.Kind.Async() && s.RunDurNs > 0 {
		b = append(w.buf[:0], `{"ph":"X","cat":"run","name":"run"`...)
		w.buf = append(appendTimes(b, s.RunStartNs, s.RunDurNs, Pid(rr.CPGroup), tid), '}')
		w.event(w.buf)
	}
}

// spanName is what a viewer shows on a span.
func spanName(rr *RankRecord, s Span) string {
	name := rr.Names[s.Name]
	switch s.Kind {
	case KindStep:
		if name != "" {
			return fmt.Sprintf("step %d (%s)", s.Step, name)
		}
		return fmt.Sprintf("step %d", s.Step)
	case KindConsensus:
		return "consensus " + name
	case KindWait, KindCopy:
		return name
	}
	return displayNames[s.Kind]
}

var displayNames = [kinds]string{
	KindBroadcast: "broadcast",
	KindFill:      "fill",
	KindVerify:    "verify load-back",
	KindAudit:     "audit",
	KindExists:    "L3 exists",
	KindFinish:    "finish",
	KindL3Read:    "L3 read",
	KindL3Write:   "L3 write",
}

// countKey names a span's Count in its args ("" for none).
func countKey(k Kind) string {
	switch k {
	case KindStep:
		return "requests"
	case KindFill, KindVerify, KindAudit, KindCopy:
		return "pages"
	case KindL3Read, KindL3Write:
		return "bytes"
	case KindExists:
		return "keys"
	}
	return ""
}

func appendTimes(b []byte, startNs, durNs int64, pid, tid int) []byte {
	b = append(b, `,"ts":`...)
	b = appendUs(b, startNs)
	b = append(b, `,"dur":`...)
	b = appendUs(b, max(durNs, 0))
	b = append(b, `,"pid":`...)
	b = strconv.AppendInt(b, int64(pid), 10)
	b = append(b, `,"tid":`...)
	return strconv.AppendInt(b, int64(tid), 10)
}

func appendUs(
	b []byte,
	ns int64,
) []byte {
	return strconv.AppendFloat(b, float64(ns)/1e3, 'f', 3, 64)
}

// quote is s as a JSON string, remembered.
func (w *eventWriter) quote(s string) []byte {
	q, ok := w.quoted[s]
	if !ok {
		q = appendString(nil, s)
		w.quoted[s] = q
	}
	return q
}

func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}
