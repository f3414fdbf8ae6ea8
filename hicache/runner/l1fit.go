package runner

import (
	"fmt"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// CheckL1HoldsLongestRequest refuses a configuration whose L1 cannot hold the workload's longest
// request, for a CP group of cp ranks on one node (the geometry Size gives it): the pages of a
// request past L1 are computed and never cached, whatever the L2's size, so a sweep over L2 sizes
// would print the same flat hit rate at every point. It reads the workload (the sweep's check,
// before its runs).
func CheckL1HoldsLongestRequest(o *config.Options, cp int) error {
	sized, err := o.Size(cp, cp, 1)
	if err != nil {
		return err
	}
	events, err := readWorkload(o)
	if err != nil {
		return wrapWorkload(err)
	}
	return checkL1Holds(o, sized, cp, workload.LongestRequestTokens(events))
}

// checkL1Holds refuses options sized for a CP group of cp ranks (o as given) whose L1 holds fewer
// pages than a request of longest tokens needs, naming the flag that set L1 and the size that
// would do, in pages and in bytes.
func checkL1Holds(o, sized *config.Options, cp, longest int) error {
	needPages := longest / sized.PageTokens // a request's last partial page is never cached anyway
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
				"its pages past L1 would be computed and never cached at any L2 size; give L1 at least %d pages "+
				"(--device-pages %d, or --device-bytes %s a rank)",
			given,
			errscope.Count(sized.DevicePages, "page", "pages"),
			errscope.Count(sized.DevicePages*sized.PageTokens, "token", "tokens"),
			longest,
			needPages,
			sized.PageTokens,
			needPages,
			needPages,
			sizing.FlagBytes(int64(needPages)*sized.RankPageBytes(cp)),
		),
	}
}
