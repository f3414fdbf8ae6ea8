package runner

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/report"
)

// TestLongFailureMessageFitsItsBroadcast: a failure's description travels in a fixed buffer; a
// message longer than it is cut, and what arrives still decodes.
func TestLongFailureMessageFitsItsBroadcast(t *testing.T) {
	buf := encodeFailure(
		&report.FailureReport{
			Check:   "placement",
			Step:    6,
			Message: strings.Repeat("ranks [2] hold digest ü; ", 400),
		},
	)
	var f report.FailureReport
	if len(buf) != failureReportBytesMax ||
		json.Unmarshal(bytes.TrimRight(buf, "\x00"), &f) != nil ||
		f.Step != 6 ||
		len(f.Message) < 3000 {
		t.Errorf("%d bytes, decoded %+v", len(buf), f.Step)
	}
}
