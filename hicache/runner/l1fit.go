package runner

import (
	"fmt"
	"slices"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/workload"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The geometry a workload needs: an L1 that holds its longest request (the pages of a request past
// L1 are computed and never cached, whatever the L2's size), and, when the serving clock measures
// what the tiers buy, an L2 that holds its median prompt (a smaller one holds no common prompt
// whole, so what the run says of the L2 is a toy's; --l2-slots 1, the way to replay L1 alone, is a
// baseline and stands). Sweep refuses the first before its runs; run with the clock refuses both on
// CP rank 0 as it reads the workload, naming the flag and the size that would do.

// CheckL1HoldsLongestRequest refuses a configuration whose L1 cannot hold the workload's longest
// request, for a CP group of cp ranks on one node (the geometry Size gives it): a sweep over L2
// sizes would print the same flat hit rate at every point. It reads the workload (the sweep's
// check, before its runs), and returns its longest request's tokens.
func CheckL1HoldsLongestRequest(o *config.Options, cp int) (longest int, err error) {
	sized, err := o.Size(cp, cp, 1)
	if err != nil {
		return 0, err
	}
	events, err := readWorkload(o)
	if err != nil {
		return 0, wrapWorkload(err)
	}
	longest = workload.LongestRequestTokens(events)
	return longest, checkL1Holds(sized, cp, longest)
}

// L1HoldsPages says whether an L1 of pages holds a request of longest tokens in pages of pageTokens
// (its last partial page is never cached anyway), as CheckL1HoldsLongestRequest requires.
func L1HoldsPages(pages, pageTokens, longest int) bool {
	return longest/max(1, pageTokens) <= pages
}

// checkServedGeometry refuses, for a run with the serving clock, options sized for a CP group of cp
// ranks (a node holding groupsOnNode groups' shares) whose L1 cannot hold the workload's longest
// request or whose L2 is smaller than its median prompt. CP rank 0 calls it on the whole workload,
// so every group finds the same.
func checkServedGeometry(sized *config.Options, cp, groupsOnNode int, events []workload.Event) error {
	if err := checkL1Holds(sized, cp, workload.LongestRequestTokens(events)); err != nil {
		return err
	}
	median := medianPromptTokens(events)
	needSlots := int((median + int64(sized.PageTokens) - 1) / int64(sized.PageTokens))
	// One slot is how a run says "no L2" (bench replay's L1-only row): not a toy, a baseline.
	if sized.L2Slots >= needSlots || sized.L2Slots == 1 && sized.L2Bytes == 0 {
		return nil
	}
	flag, given := "l2-slots", fmt.Sprint(sized.L2Slots)
	if sized.L2Bytes > 0 {
		flag, given = "l2-bytes", sizing.FormatBytes(sized.L2Bytes)
	}
	nodeBytes := int64(needSlots) * sized.RankPageBytes(cp) * int64(cp) *
		int64(max(1, groupsOnNode)) / int64(max(1, sized.GroupNodes))
	return &errscope.ConfigError{
		Flag: flag,
		Reason: fmt.Sprintf(
			"%s gives L2 %s = %s per CP group, less than the workload's median prompt (%s): "+
				"the L2 would hold no common prompt whole, and what the serving clock says it buys would be a toy's; "+
				"give L2 at least %d slots (--l2-slots %d, or --l2-bytes %s a node)",
			given,
			errscope.Count(sized.L2Slots, "slot", "slots"),
			errscope.Count(int64(sized.L2Slots)*int64(sized.PageTokens), "token", "tokens"),
			errscope.Count(median, "token", "tokens"),
			needSlots,
			needSlots,
			sizing.FlagBytes(nodeBytes),
		),
	}
}

// checkL1Holds refuses options sized for a CP group of cp ranks whose L1 holds fewer pages than a
// request of longest tokens needs, naming the flag that set L1 (or the sizing from the model and
// the GPU) and the size that would do, in pages and in bytes.
func checkL1Holds(sized *config.Options, cp, longest int) error {
	needPages := longest / sized.PageTokens // a request's last partial page is never cached anyway
	if L1HoldsPages(sized.DevicePages, sized.PageTokens, longest) {
		return nil
	}
	flag, given := "device-pages", fmt.Sprint(sized.DevicePages)
	switch {
	case sized.L1FromGPU && sized.SizedBy != "":
		flag, given = "device-bytes", "the model's KV budget on the GPU, "+
			sizing.FormatBytes(sized.DeviceBytes)+" a GPU,"
	case sized.DeviceBytes > 0:
		flag, given = "device-bytes", sizing.FormatBytes(sized.DeviceBytes)
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

// medianPromptTokens is the median of the workload's prompts, in tokens (0 without a request).
func medianPromptTokens(events []workload.Event) int64 {
	var prompts []int64
	for i := range events {
		if !events[i].Flush {
			prompts = append(prompts, int64(events[i].Request.Tokens()))
		}
	}
	if len(prompts) == 0 {
		return 0
	}
	slices.Sort(prompts)
	return prompts[len(prompts)/2]
}
