package cli

// sweep's --l2-policy: run's flag (one definition, whose usage says what sweep takes), read on
// sweep as the policies to compare (a list, or all) instead of one. Given, the sweep compares them
// on the shared pool with the OFFLINE bound at every size (hicache/sweep's policies.go); not
// given, it runs lru alone, as before there were policies, and computes no bound.

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/hicache/sweep"
	"github.com/cphicache/cphicache/internal/errscope"
	"github.com/cphicache/cphicache/pool"
)

// allPolicies is --l2-policy's value for every policy, in pool.PolicyNames' order.
const allPolicies = "all"

// parseSweepPolicies reads sweep's --l2-policy: all, or distinct policy names separated by commas.
func parseSweepPolicies(value string) ([]pool.Policy, error) {
	if strings.TrimSpace(value) == allPolicies {
		value = strings.Join(pool.PolicyNames(), ",")
	}
	var policies []pool.Policy
	for _, name := range strings.Split(value, ",") {
		name = strings.TrimSpace(name)
		p, err := pool.ParsePolicy(name)
		if err != nil {
			return nil, &errscope.ConfigError{
				Flag:   "l2-policy",
				Reason: fmt.Sprintf("%v, or %s for every one", err, allPolicies),
			}
		}
		if slices.Contains(policies, p) {
			return nil, &errscope.ConfigError{
				Flag:   "l2-policy",
				Reason: fmt.Sprintf("%s is listed twice in %q", name, value),
			}
		}
		policies = append(policies, p)
	}
	return policies, nil
}

// sweepPolicies are the policies a sweep compares, and the first --l2-policy names (value, as
// given: all or a list), the one its per-rank copies and no L2 run: compare is nil when --l2-policy
// is not given (the options' own, lru, alone and without the bound) or the sweep runs the per-rank
// copies alone (one policy, theirs, without the bound: the policies are compared on the shared
// pool), which refuses more than one. The flag's value stays as given, so that the provenance
// records what the user ran, not the first policy of it.
func sweepPolicies(c *cli.Context, value string, shared bool) (
	compare []pool.Policy, first string, err error,
) {
	if !c.IsSet("l2-policy") {
		return nil, value, nil
	}
	policies, err := parseSweepPolicies(value)
	if err != nil {
		return nil, "", err
	}
	first = policies[0].String()
	switch {
	case shared:
		return policies, first, nil
	case len(policies) > 1:
		return nil, "", &errscope.ConfigError{
			Flag: "l2-policy",
			Reason: fmt.Sprintf("%q: the sweep compares policies on the shared pool, which "+
				"--l2-design per-rank does not run; give one policy, or --l2-design shared or both",
				value),
		}
	}
	return nil, first, nil
}

// sayPolicies is the header's line of a sweep that compares policies: which, and what the OFFLINE
// bound beside them is.
func sayPolicies(policies []pool.Policy) {
	if len(policies) == 0 {
		return
	}
	names := make([]string, len(policies))
	for i, p := range policies {
		names[i] = p.String()
	}
	fmt.Printf(
		"# L2 policies compared on the shared pool at every size: %s (per-rank copies and no L2 "+
			"run %s); beside them the OFFLINE bound at L1 pages + L2 slots: Belady's MIN over the "+
			"prefix tree, which reads the trace's future, so no policy can pass it (docs/POLICIES.md)\n",
		strings.Join(names, ", "), names[0],
	)
}

// writeBoundPoint prints a size's OFFLINE bound (nil: none), after its policies' points: its hits,
// and with the serving clock the MODELLED TTFT at them, loads free, which bounds no policy's TTFT.
func writeBoundPoint(w io.Writer, b *sweep.BoundPoint) {
	if b == nil {
		return
	}
	serving := ""
	if s := b.Serving; s != nil {
		serving = fmt.Sprintf(
			"; MODELLED TTFT at its hits, loaded at no cost (not a bound on TTFT): p50 %.3g s, "+
				"p99 %.3g s, %.0f prompt tokens/s",
			s.TTFTP50, s.TTFTP99, s.PromptTokensPerSecond,
		)
	}
	fmt.Fprintf(w, "  OFFLINE bound at L1 + L2 = %d pages: hit %.1f%% (%d tokens)%s\n",
		b.CapacityPages, 100*b.HitRate, b.HitTokens, serving)
}

// writePolicyAnswers prints, after the answer, the L2 each compared policy recommends by the same
// rule over its own curve (MODELLED), and what the OFFLINE bound reaches at that size.
func writePolicyAnswers(w io.Writer, res *sweep.Result) {
	for _, c := range res.Policies {
		r := c.Recommended
		if r == nil {
			continue
		}
		bound := ""
		if r.Point < len(res.OfflineBound) {
			b := res.OfflineBound[r.Point]
			bound = fmt.Sprintf("; the OFFLINE bound there: hit %.1f%%", 100*b.HitRate)
			if b.Serving != nil {
				bound += fmt.Sprintf(", TTFT p50 %s at its hits", seconds(b.Serving.TTFTP50))
			}
		}
		fmt.Fprintf(w, "  under %s: the L2 to buy %s a node (%s a CP group), hit %.1f%%, "+
			"TTFT p50 %s, p99 %s (its best p50 %s)%s\n",
			c.Policy, modelBytes(res, r.L2BytesPerNode), errscope.Count(r.L2Tokens, "token", "tokens"),
			100*r.HitRate, seconds(r.TTFTP50), seconds(r.TTFTP99), seconds(r.BestTTFTP50), bound)
	}
}

// modelBytes is a size in the sweep's bytes: the model's KV when it has one.
func modelBytes(res *sweep.Result, b int64) string {
	if res.Model == "" {
		return sizing.FormatBytes(b)
	}
	return sizing.FormatBytes(b) + " of " + res.Model + "'s KV"
}
