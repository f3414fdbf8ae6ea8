package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/internal/errscope"
)

// Validate's table, from the checks the runner's passes made (hicache/validate): the rows, the
// verdict, the table an operator reads and the JSON report.

// Check is one row of the validation table.
type Check struct {
	Name   string `json:"name"`
	Ranks  int    `json:"ranks"`
	Steps  int64  `json:"steps"`
	Result string `json:"result"` // pass, fail, or skip (Skipped says why)
	Wrong  int64  `json:"wrong"`
	Detail string `json:"detail"`
	// Skipped, for a skipped check, is SkipSingleRank (nothing to compare in a one-rank CP group)
	// or SkipNotExercised (nothing wrong, but the workload never took the path the check watches).
	Skipped string `json:"skipped,omitempty"`
}

// Why a check was skipped (Check.Skipped).
const (
	SkipSingleRank   = "single_rank"
	SkipNotExercised = "not_exercised"
)

// skipReasons is what the table's closing line says of each kind of skip.
var skipReasons = []struct{ kind, text string }{
	{SkipSingleRank, "not applicable to single-rank CP groups: run with cp 2 or more"},
	{
		SkipNotExercised,
		"not exercised by this workload: a larger one, or --sync-copies on a busy node, exercises them",
	},
}

// ValidationReport is what `cphicache validate` prints and writes.
type ValidationReport struct {
	Ranks  int           `json:"ranks"`
	CP     int           `json:"cp"`
	DP     int           `json:"dp"`
	Checks []Check       `json:"checks"`
	Groups []GroupReport `json:"groups"`
	// Result is the job's verdict, in run's words (set by WriteJSON): OK, "OK, but N checks skipped
	// (...)" or FAILED, so that a script reads one field of either report.
	Result string `json:"result"`
	// Provenance is what produced the table (the command sets it): the build, the command line,
	// every flag.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// ValidationFailed ends validate with a non-zero exit; the table already says which checks failed.
type ValidationFailed struct{ Failed int }

func (e *ValidationFailed) Error() string {
	return fmt.Sprintf(
		"validation failed: %s failed (see the table)",
		errscope.Count(e.Failed, "check", "checks"),
	)
}

// Scope: the table is aggregated over the whole job, so every rank fails alike.
func (e *ValidationFailed) Scope() errscope.Scope { return errscope.JobScope }

// Failed counts the failed checks.
func (v *ValidationReport) Failed() int {
	n := 0
	for _, c := range v.Checks {
		if c.Result == "fail" {
			n++
		}
	}
	return n
}

// NotCovered is nil when every check ran, and a *errscope.NotCoveredError naming the skipped ones
// otherwise (--strict).
func (v *ValidationReport) NotCovered() error {
	var skipped []string
	for _, c := range v.Checks {
		if c.Result == "skip" {
			skipped = append(skipped, c.Name)
		}
	}
	if len(skipped) == 0 {
		return nil
	}
	return &errscope.NotCoveredError{
		What: errscope.Count(
			len(skipped),
			"check",
			"checks",
		) + " skipped (" + strings.Join(
			skipped,
			", ",
		) + ")",
	}
}

// Verdict is the report's result: FAILED when a check failed, "OK, but ..." naming the skipped
// checks, else OK.
func (v *ValidationReport) Verdict() string {
	if v.Failed() > 0 {
		return "FAILED"
	}
	var nc *errscope.NotCoveredError
	if errors.As(v.NotCovered(), &nc) {
		return "OK, but " + nc.What
	}
	return "OK"
}

// WriteTable prints the validation matrix like nccl-tests: a '#' header, fixed-width rows, a
// closing count.
func (v *ValidationReport) WriteTable(w io.Writer) {
	fmt.Fprintf(
		w,
		"# cphicache validate: %s, cp %d, dp %d\n",
		errscope.Plural(v.Ranks, "rank"),
		v.CP,
		v.DP,
	)
	fmt.Fprintf(
		w,
		"# %-22s %6s %8s %7s %7s  %s\n",
		"check",
		"ranks",
		"steps",
		"result",
		"#wrong",
		"detail",
	)
	for _, c := range v.Checks {
		fmt.Fprintf(
			w,
			"  %-22s %6d %8d %7s %7d  %s\n",
			c.Name,
			c.Ranks,
			c.Steps,
			c.Result,
			c.Wrong,
			c.Detail,
		)
	}
	passed, skipped := 0, map[string]int{}
	for _, c := range v.Checks {
		switch c.Result {
		case "pass":
			passed++
		case "skip":
			skipped[c.Skipped]++
		}
	}
	skipText := ""
	for _, r := range skipReasons {
		if n := skipped[r.kind]; n > 0 {
			skipText += fmt.Sprintf(", %d skipped (%s)", n, r.text)
		}
	}
	fmt.Fprintf(
		w,
		"# %d checks: %d passed%s, %d failed\n",
		len(v.Checks),
		passed,
		skipText,
		v.Failed(),
	)
}

// WriteJSON writes the validation report to path (--report), whole or not at all.
func (v *ValidationReport) WriteJSON(path string) error {
	v.Result = v.Verdict()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return outfile.Write("report", path, append(b, '\n'))
}
