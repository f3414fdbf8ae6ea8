package runner

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// CheckL1HoldsLongestRequest refuses a configuration whose L1 cannot hold the workload's longest
// request: the pages of a request past L1 are computed and never cached, whatever the L2's size, so
// a sweep over L2 sizes would print the same flat hit rate at every point. It reads the workload
// (the sweep's check, before its runs).
func CheckL1HoldsLongestRequest(o *config.Options) error {
	sized, err := o.Size(1, 1, 1)
	if err != nil {
		return err
	}
	events, err := readWorkload(o)
	if err != nil {
		return wrapWorkload(err)
	}
	longest := workload.LongestRequestTokens(events)
	needPages := longest / o.PageTokens // a request's last partial page is never cached anyway
	if needPages <= sized.DevicePages {
		return nil
	}
	flag, given := "device-pages", fmt.Sprint(sized.DevicePages)
	if o.DeviceBytes > 0 {
		flag, given = "device-bytes", sizing.FormatBytes(o.DeviceBytes)
	}
	return &errscope.ConfigError{
		Flag: flag,
		Reason: fmt.Sprintf(
			"%s gives L1 %s = %s per rank, but the workload's longest request has %d tokens = %d pages of %d: "+
				"its pages past L1 would be computed and never cached at any L2 size; give L1 at least %d pages",
			given,
			errscope.Count(sized.DevicePages, "page", "pages"),
			errscope.Count(
				sized.DevicePages*o.PageTokens,
				"token",
				"tokens",
			),
			longest,
			needPages,
			o.PageTokens,
			needPages,
		),
	}
}
