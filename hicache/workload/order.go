package workload

import (
	"bufio"
	"bytes"
	"io"
)

// TimestampOrder is how a Mooncake trace's timestamps run. The serving clock never lets time go
// back (SERVING.md): a request whose timestamp is earlier than a line before it arrives when the
// latest before it did, queued behind it. That is a fact of the trace a user should hear of once,
// not a silent rewrite of it.
type TimestampOrder struct {
	// request lines whose timestamp is earlier than the latest timestamp of the lines before them
	Backwards int
	FirstLine int // the first of those lines, 1-based as a TraceError's; 0 when there is none
	// LatestMs is the latest timestamp: the serving clock's last arrival, in trace time from 0 (-1
	// without any).
	LatestMs int64
}

// ScanTimestampOrder reads the timestamps of a Mooncake trace (the token format has none: a zero
// order), up to limitRequests requests (0 = all), as ReadTraceAs reads its lines. A line that does
// not parse is passed over: the replay's own read names it.
func ScanTimestampOrder(r io.Reader, limitRequests int) (TimestampOrder, error) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 64<<10), traceLineBytesMax)
	order := TimestampOrder{LatestMs: -1}
	for line, requests := 1, 0; (limitRequests == 0 || requests < limitRequests) && scanner.Scan(); line++ {
		text := bytes.Trim(scanner.Bytes(), jsonSpaces)
		var f mooncakeLine
		if len(text) == 0 || splitFields(text, &f) != nil || f.op != nil {
			continue
		}
		requests++
		timestampMs, err := parseBoundedInt("timestamp", f.timestamp, 0, timestampMsMax)
		if err != nil {
			continue
		}
		if timestampMs < order.LatestMs {
			order.Backwards++
			if order.FirstLine == 0 {
				order.FirstLine = line
			}
		}
		order.LatestMs = max(order.LatestMs, timestampMs)
	}
	return order, scanner.Err()
}
