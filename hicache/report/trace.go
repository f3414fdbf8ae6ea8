package report

import (
	"fmt"
	"io"

	"github.com/cphicache/cphicache/internal/errscope"
)

// TraceReport is what the run saw of its trace's own order: request lines whose timestamp is
// earlier than a line before them (a Mooncake trace), which the serving clock queues behind the
// line before (SERVING.md) rather than let time go back. Said once, here and in the summary, so
// that a user learns the trace was not in order.
type TraceReport struct {
	// request lines whose timestamp is earlier than one before
	TimestampsBackwards int `json:"timestamps_backwards"`
	FirstBackwardsLine  int `json:"first_backwards_line"` // the first of them, 1-based
}

// writeSummary says how many lines went back and where the first is; nothing for a trace in order.
func (t *TraceReport) writeSummary(w io.Writer, serving bool) {
	if t == nil || t.TimestampsBackwards == 0 {
		return
	}
	effect := "unused here: requests replay in line order without the serving clock"
	if serving {
		effect = "the serving clock queued each behind the line before it, at that line's arrival"
	}
	fmt.Fprintf(
		w,
		"  trace: %s earlier than a line before (the first: line %d); timestamps %s\n",
		errscope.Count(
			t.TimestampsBackwards,
			"request line has a timestamp",
			"request lines have a timestamp",
		),
		t.FirstBackwardsLine,
		effect,
	)
}
