package cli

// sweep's own flags beside run's (--l2-design, --recommend-margin, --ttft-target) and the answer it
// prints after its points (hicache/sweep's Answer): the L2 to buy per node in the model's bytes,
// what it buys beside no L2 and beside per-rank copies, the same with the modelled L3, and whether
// the load needs more replicas first. Every figure of it is MODELLED.

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/report"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/sweep"
	"github.com/cphicache/cphicache/internal/errscope"
)

// sweepAnswerOptions are sweep's flags of what its points run and how it answers.
type sweepAnswerOptions struct {
	design     string
	designs    sweep.Designs
	marginPct  float64
	ttftTarget time.Duration
}

// The answer's defaults: the margin of the best TTFT p50 a smaller L2 may be within, and the TTFT
// p50 the load's replicas aim at (an interactive prompt's first token in a couple of seconds).
const (
	defaultRecommendMarginPct = 5
	defaultTTFTTarget         = 2 * time.Second
)

// l2DesignNames are --l2-design's values.
var l2DesignNames = []string{"both", sweep.DesignShared, sweep.DesignPerRank}

func (o *sweepAnswerOptions) designFlag() cli.Flag {
	return &cli.StringFlag{
		Name:        "l2-design",
		Value:       "both",
		EnvVars:     []string{"CPHICACHE_L2_DESIGN"},
		Category:    "sweep",
		Destination: &o.design,
		Usage:       "which L2 designs each size runs: shared (the CP group's one pool on the node), per-rank (the design it replaces: whole copies on each GPU, 1/cp of the L1 pages, and in each rank's own pool of 1/cp of the node's bytes, each GPU loading a hit's whole KV over its own link; docs/SIZING.md, \"What sharing buys\"), or both, side by side in hit rate and, with the serving clock, MODELLED TTFT",
	}
}

func (o *sweepAnswerOptions) clockFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{
			Name:        "recommend-margin",
			Value:       defaultRecommendMarginPct,
			EnvVars:     servingEnv("RECOMMEND_MARGIN"),
			Category:    servingCategory,
			Destination: &o.marginPct,
			Usage:       "percent: the L2 the sweep recommends is the smallest whose MODELLED TTFT p50 is within this of the best on the curve (0 to 100)",
		},
		&cli.DurationFlag{
			Name:        "ttft-target",
			Value:       defaultTTFTTarget,
			EnvVars:     servingEnv("TTFT_TARGET"),
			Category:    servingCategory,
			Destination: &o.ttftTarget,
			Usage:       "the MODELLED TTFT p50 to bring the load under: the sweep gives the DP replicas (CP groups, each its own cache) it takes, the fewest of 1 to 64, replaying the virtual clock with the requests split over them as run splits a workload, at the group's hits (e.g. 2s, 500ms)",
		},
	}
}

// check reads --l2-design and checks the answer's flags, which need the clock on (serving; nil
// refuses them given, as every serving flag).
func (o *sweepAnswerOptions) check(c *cli.Context, serving *config.ServingOptions) error {
	if serving == nil {
		if err := refuseGiven(c, flagNames(o.clockFlags(), 0),
			"needs --gpu or --prefill-profile, which turn the serving clock on"); err != nil {
			return err
		}
	}
	switch strings.TrimSpace(o.design) {
	case "both":
		o.designs = sweep.Designs{Shared: true, PerRank: true}
	case sweep.DesignShared:
		o.designs = sweep.Designs{Shared: true}
	case sweep.DesignPerRank:
		o.designs = sweep.Designs{PerRank: true}
	default:
		return &errscope.ConfigError{
			Flag:   "l2-design",
			Reason: fmt.Sprintf("%q is not one of %s", o.design, joinNames(l2DesignNames)),
		}
	}
	if !(o.marginPct >= 0 && o.marginPct <= 100) {
		return &errscope.ConfigError{
			Flag:   "recommend-margin",
			Reason: fmt.Sprintf("%v is not a percentage from 0 to 100", o.marginPct),
		}
	}
	if o.ttftTarget <= 0 {
		return &errscope.ConfigError{
			Flag:   "ttft-target",
			Reason: fmt.Sprintf("%v: give a time above 0, such as 2s", o.ttftTarget),
		}
	}
	if serving != nil {
		serving.TTFTTargetSeconds = o.ttftTarget.Seconds()
	}
	return nil
}

// writeAnswer prints the sweep's answer after its points, when it has one (the serving clock).
func writeAnswer(w io.Writer, res *sweep.Result, o sweepAnswerOptions) {
	a := res.Answer
	if a == nil {
		return
	}
	bytes := func(b int64) string {
		if res.Model == "" {
			return sizing.FormatBytes(b)
		}
		return sizing.FormatBytes(b) + " of " + res.Model + "'s KV"
	}
	fmt.Fprintf(w, "# the answer, MODELLED (%s):\n", res.Prefill)
	c, policy := a.L2, answerPolicy(res)
	fmt.Fprintf(w, "  the L2 to buy%s: %s a node (%s a CP group of %d), the smallest within %g%% of the best TTFT p50 on the curve (%s): hit %.1f%%, TTFT p50 %s, p99 %s%s%s\n",
		policy, bytes(c.L2BytesPerNode), errscope.Count(c.L2Tokens, "token", "tokens"), res.GroupGPUs,
		a.MarginPct, seconds(c.BestTTFTP50), 100*c.HitRate, seconds(c.TTFTP50), seconds(c.TTFTP99),
		besideNoL2(a), besidePerRank(a))
	if l := a.WithL3; l != nil {
		fmt.Fprintf(w, "  with the modelled L3 under it (unbounded, holding every block the trace writes: %s = %s a CP group): the L2 to buy%s %s a node, hit %.1f%%, TTFT p50 %s, p99 %s (best %s)\n",
			errscope.Count(l.L3Tokens, "token", "tokens"), bytes(l.L3Bytes), under(a.Policy),
			bytes(l.L2BytesPerNode),
			100*l.HitRate, seconds(l.TTFTP50), seconds(l.TTFTP99), seconds(l.BestTTFTP50))
	}
	writeLoad(w, a.Load)
}

// answerPolicy names the L2 policy the answer's curve ran, when --l2-policy was given: the first
// listed, when the sweep compared several (each one's own size follows the answer).
func answerPolicy(res *sweep.Result) string {
	if p := res.Answer.Policy; p != "" && len(res.Policies) > 1 {
		return under(p) + " (the first --l2-policy listed; each policy's own follows)"
	}
	return under(res.Answer.Policy)
}

// under is " under policy", or nothing without one.
func under(policy string) string {
	if policy == "" {
		return ""
	}
	return " under " + policy
}

// besideNoL2 is what the chosen L2 buys beside none.
func besideNoL2(a *sweep.Answer) string {
	if a.NoL2 == nil {
		return ""
	}
	return fmt.Sprintf("; beside no L2: TTFT p50 %s, p99 %s", seconds(a.NoL2.TTFTP50),
		seconds(a.NoL2.TTFTP99))
}

// besidePerRank is what the chosen L2 buys beside per-rank copies in the same node memory.
func besidePerRank(a *sweep.Answer) string {
	p := a.PerRank
	if p == nil || p.Serving == nil {
		return ""
	}
	return fmt.Sprintf("; beside per-rank copies of the same bytes (whole copies: a GPU's L1 of %s%s, "+
		"a rank's pool of %s): hit %.1f%%, TTFT p50 %s, p99 %s",
		errscope.Count(p.L1CapacityTokens, "token", "tokens"), perRankL1Short(*p),
		errscope.Count(p.L2Tokens, "token", "tokens"), 100*p.HitRate, seconds(p.Serving.TTFTP50),
		seconds(p.Serving.TTFTP99))
}

// writeLoad says the load at the chosen L2's hits: the demand beside the group's capacity (where
// it exceeds it, the queue grows the whole trace and is most of the TTFT: no L2 size fixes that),
// and the replicas the TTFT target takes.
func writeLoad(w io.Writer, l *report.ServingLoad) {
	if l == nil {
		return
	}
	load := fmt.Sprintf("the group serves %.0f prompt tokens/s at these hits; the queue is %.0f%% of the mean TTFT",
		l.CapacityPromptTokensPerSecond, 100*l.QueueShareOfMeanTTFT)
	if d := l.DemandPromptTokensPerSecond; d > 0 {
		ratio := d / math.Max(1, l.CapacityPromptTokensPerSecond)
		load = fmt.Sprintf("the trace asks %.0f prompt tokens/s, %.2fx what the group serves at these hits (%.0f); the queue is %.0f%% of the mean TTFT (bursts)",
			d, ratio, l.CapacityPromptTokensPerSecond, 100*l.QueueShareOfMeanTTFT)
		if ratio > 1 {
			load = fmt.Sprintf("the trace asks %.0f prompt tokens/s, %.2fx what the group serves at these hits (%.0f): the queue is most of the TTFT (%.0f%% of the mean) and no L2 size fixes it",
				d, ratio, l.CapacityPromptTokensPerSecond, 100*l.QueueShareOfMeanTTFT)
		}
	}
	fmt.Fprintf(w, "  load: %s%s\n", load, replicasText(l))
}

// replicasText says how many DP replicas bring the TTFT p50 under --ttft-target.
func replicasText(l *report.ServingLoad) string {
	target := seconds(l.TTFTTargetSeconds)
	switch {
	case l.TTFTTargetSeconds <= 0:
		return ""
	case l.Replicas == 1:
		return fmt.Sprintf("; one group meets --ttft-target %s (TTFT p50 %s)", target, seconds(l.ReplicasTTFTP50))
	case l.Replicas > 1:
		return fmt.Sprintf("; %d DP replicas bring TTFT p50 under --ttft-target %s (%s), the fewest of "+
			"1 to %d, the requests split over them as run splits a trace (an estimate at this group's "+
			"hits: each replica keeps a full L1 and L2 and sees 1/%d of the requests, so it may hit "+
			"less or more)", l.Replicas, target, seconds(l.ReplicasTTFTP50), l.ReplicasMax, l.Replicas)
	}
	return fmt.Sprintf("; no number of DP replicas from 1 to %d brings TTFT p50 under --ttft-target %s "+
		"(%s at %d, at this group's hits)", l.ReplicasMax, target, seconds(l.ReplicasTTFTP50),
		l.ReplicasMax)
}

// seconds writes a modelled time with its unit, a zero too.
func seconds(s float64) string {
	switch {
	case s == 0:
		return "0 s"
	case s < 1:
		return fmt.Sprintf("%.1f ms", s*1e3)
	default:
		return fmt.Sprintf("%.3g s", s)
	}
}
