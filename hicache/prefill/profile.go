package prefill

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/internal/errscope"
)

// Profile is a prefill model measured by the user on their own engine and GPU group
// (--prefill-profile): rows of (new tokens, cached tokens, milliseconds), each the time of one
// prefill of that many new tokens after that many cached ones, on the deployment's whole group. Its
// times are the group's, so it takes no GPU count.
//
// The file: one row a line, three numbers separated by spaces, tabs or a comma (CSV works):
// new_tokens (an integer >= 1), cached_tokens (an integer >= 0), milliseconds (> 0, at most 1e9). A
// '#' starts a comment, to the end of the line; blank lines are skipped. A row that repeats
// another's (new, cached) is refused, as is a file with no row. A row whose time is below that of a
// row with fewer new tokens at its cached count, or with fewer cached tokens at its new count, is
// refused: a prefill of more tokens is not faster, and a falling line extended beyond the table
// reaches zero, a free prefill that no tier could beat. Errors name the file and line.
//
// Interpolation (Seconds): the rows are grouped by cached tokens; within a group, piecewise linear
// in new tokens between the two nearest rows; across groups, piecewise linear in cached tokens
// between the two groups nearest to the query. Beyond the table, the nearest two rows (or groups)
// are extended linearly: extrapolated, so a query far outside the measured range is a guess, and
// the summary says the profile's range. Below a group's fewest new tokens, the time is no less
// than its smallest row's time per token (belowTable: the line through two rows of a cost that
// grows faster than its tokens falls to zero before the tokens do). A group of one row is
// proportional in new tokens (its time x new / its new); a table of one cached value does not
// change with cached tokens. A result below zero (a steep extrapolation downwards in cached
// tokens) is 0.
type Profile struct {
	Name   string
	groups []profileGroup // by cached tokens, ascending
	rows   int
}

// profileGroup is the rows of one cached-token count, by new tokens ascending.
type profileGroup struct {
	cachedTokens float64
	newTokens    []float64
	seconds      []float64
}

// OpenProfile reads the profile at path through open (os.Open's shape; the package opens no file
// itself).
func OpenProfile(path string, open func(string) (io.ReadCloser, error)) (*Profile, error) {
	f, err := open(path)
	if err != nil {
		return nil, &errscope.ConfigError{Flag: "prefill-profile", Reason: err.Error()}
	}
	defer f.Close()
	return ParseProfile(path, f)
}

// ParseProfile reads a profile from r; name is the file's, for errors ("name:line: ...").
func ParseProfile(name string, r io.Reader) (*Profile, error) {
	var rows []profileRow
	seen := map[[2]float64]int{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.FieldsFunc(
			text,
			func(c rune) bool { return c == ',' || c == ' ' || c == '\t' || c == '\r' },
		)
		if len(fields) == 0 {
			continue
		}
		n, c, ms, err := parseProfileRow(fields)
		if err != nil {
			return nil, profileError(name, line, err.Error())
		}
		if first, dup := seen[[2]float64{n, c}]; dup {
			return nil, profileError(
				name,
				line,
				fmt.Sprintf("new %v cached %v again (line %d has it)", n, c, first),
			)
		}
		seen[[2]float64{n, c}] = line
		rows = append(rows, profileRow{n, c, ms, line})
	}
	if err := sc.Err(); err != nil {
		return nil, &errscope.ConfigError{
			Flag:   "prefill-profile",
			Reason: fmt.Sprintf("%s: %v", name, err),
		}
	}
	if len(rows) == 0 {
		return nil, &errscope.ConfigError{
			Flag: "prefill-profile",
			Reason: fmt.Sprintf(
				"%s: no rows (each line: new_tokens cached_tokens milliseconds)",
				name,
			),
		}
	}
	slices.SortFunc(rows, func(a, b profileRow) int {
		if a.cachedTokens != b.cachedTokens {
			return cmp.Compare(a.cachedTokens, b.cachedTokens)
		}
		return cmp.Compare(a.newTokens, b.newTokens)
	})
	if err := checkExtendedSegments(name, rows); err != nil {
		return nil, err
	}
	p := &Profile{Name: name, rows: len(rows)}
	for _, q := range rows {
		if len(p.groups) == 0 || p.groups[len(p.groups)-1].cachedTokens != q.cachedTokens {
			p.groups = append(p.groups, profileGroup{cachedTokens: q.cachedTokens})
		}
		g := &p.groups[len(p.groups)-1]
		g.newTokens, g.seconds = append(g.newTokens, q.newTokens), append(g.seconds, q.ms/1e3)
	}
	return p, nil
}

// profileRow is one line of a profile.
type profileRow struct {
	newTokens, cachedTokens, ms float64
	line                        int
}

// checkExtendedSegments refuses a profile whose time falls along a segment the table is extended
// along: the last two rows of each cached count (beyond its most new tokens) and the last two
// cached counts (beyond the most cached tokens). Extended, a falling segment reaches zero, a free
// prefill that no tier could beat. A fall inside the table (a measurement's noise near the latency
// floor, 10.2 ms then 10.1) stays between its rows and is kept. rows are sorted by cached, then new
// tokens.
func checkExtendedSegments(name string, rows []profileRow) error {
	lastCached := rows[len(rows)-1].cachedTokens
	// the cached count before the last, by new tokens
	prevCached, prevGroup := -1.0, map[float64]profileRow{}
	for i, q := range rows {
		lastOfGroup := i+1 == len(rows) || rows[i+1].cachedTokens != q.cachedTokens
		if i > 0 && lastOfGroup && rows[i-1].cachedTokens == q.cachedTokens && q.ms < rows[i-1].ms {
			prev := rows[i-1]
			return fallingProfileError(
				name,
				q.line,
				prev.line,
				"new",
				q.newTokens,
				prev.newTokens,
				q.ms,
				prev.ms,
			)
		}
		if q.cachedTokens == lastCached {
			if prev, ok := prevGroup[q.newTokens]; ok && q.ms < prev.ms {
				return fallingProfileError(
					name,
					q.line,
					prev.line,
					"cached",
					q.cachedTokens,
					prev.cachedTokens,
					q.ms,
					prev.ms,
				)
			}
			continue
		}
		if q.cachedTokens != prevCached {
			prevCached, prevGroup = q.cachedTokens, map[float64]profileRow{}
		}
		prevGroup[q.newTokens] = q
	}
	return nil
}

// profileMillisecondsMax bounds a row's time (about 11.6 days, beyond any prefill), so that
// extrapolating from the rows stays a finite number of seconds for any token counts an int64 holds.
const profileMillisecondsMax = 1e9

// parseProfileRow reads one row's three fields.
func parseProfileRow(fields []string) (newTokens, cachedTokens, ms float64, err error) {
	if len(fields) != 3 {
		return 0, 0, 0, fmt.Errorf(
			"%d fields, want 3: new_tokens cached_tokens milliseconds",
			len(fields),
		)
	}
	n, errN := strconv.ParseInt(fields[0], 10, 64)
	c, errC := strconv.ParseInt(fields[1], 10, 64)
	ms, errMs := strconv.ParseFloat(fields[2], 64)
	switch {
	case errN != nil || n < 1:
		return 0, 0, 0, fmt.Errorf("new_tokens %q is not an integer >= 1", fields[0])
	case errC != nil || c < 0:
		return 0, 0, 0, fmt.Errorf("cached_tokens %q is not an integer >= 0", fields[1])
	case errMs != nil || !(ms > 0) || ms > profileMillisecondsMax:
		return 0, 0, 0, fmt.Errorf(
			"milliseconds %q is not a number > 0 and <= %g",
			fields[2],
			profileMillisecondsMax,
		)
	}
	return float64(n), float64(c), ms, nil
}

// fallingProfileError refuses a row that is faster than a row with fewer tokens of kind ("new" or
// "cached").
func fallingProfileError(
	name string,
	line, prevLine int,
	kind string,
	tokens, prevTokens, ms, prevMs float64,
) error {
	return profileError(
		name,
		line,
		fmt.Sprintf(
			"%v ms at %v %s tokens, less than line %d's %v ms at %v: a prefill of more tokens must not take less time",
			ms,
			tokens,
			kind,
			prevLine,
			prevMs,
			prevTokens,
		),
	)
}

func profileError(name string, line int, reason string) error {
	return &errscope.ConfigError{
		Flag:   "prefill-profile",
		Reason: fmt.Sprintf("%s:%d: %s", name, line, reason),
	}
}

// Seconds is the profile's time for one prefill of newTokens after cachedTokens (see Profile).
func (p *Profile) Seconds(newTokens, cachedTokens int64) float64 {
	if newTokens <= 0 {
		return 0
	}
	n, c := float64(newTokens), float64(cachedTokens)
	if len(p.groups) == 1 {
		return max(p.groups[0].at(n), 0)
	}
	i := segment(len(p.groups), func(k int) float64 { return p.groups[k].cachedTokens }, c)
	lo, hi := &p.groups[i], &p.groups[i+1]
	t := (c - lo.cachedTokens) / (hi.cachedTokens - lo.cachedTokens)
	return max(lerp(lo.at(n), hi.at(n), t), 0)
}

// BatchSeconds is the profile of the batch's totals: one prefill of the sum of its requests' new
// tokens after the sum of their cached tokens. A step's fixed cost (the weights' reads, the
// launches) is then paid once, as the engine pays it; the attention of many short requests is
// overstated (their pairs are counted as one long request's), exact for a batch of one. Measure the
// profile with batches shaped like the workload's to keep that error small.
func (p *Profile) BatchSeconds(reqs []Request) float64 {
	var n, c int64
	for _, q := range reqs {
		if q.NewTokens > 0 {
			n, c = n+q.NewTokens, c+q.CachedTokens
		}
	}
	return p.Seconds(n, c)
}

// RecomputeSeconds is the profile's time for the prefix as one prefill from nothing: a profile
// cannot tell a step's fixed cost from the prefix's own, so short prefixes' break-even rates come
// out low (conservative: a tier must beat a little more than the recompute really costs in a
// batch).
func (p *Profile) RecomputeSeconds(prefixTokens int64) float64 { return p.Seconds(prefixTokens, 0) }

// Describe names the profile and the range it was measured over (beyond it, Seconds extrapolates).
func (p *Profile) Describe() string {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, g := range p.groups {
		lo, hi = min(lo, g.newTokens[0]), max(hi, g.newTokens[len(g.newTokens)-1])
	}
	return fmt.Sprintf(
		"profile: %s, %d rows, new tokens %.0f to %.0f, cached tokens %.0f to %.0f (linear beyond)",
		p.Name,
		p.rows,
		lo,
		hi,
		p.groups[0].cachedTokens,
		p.groups[len(p.groups)-1].cachedTokens,
	)
}

// at is the group's time for n new tokens: linear between its two nearest rows, extended beyond
// them; below its smallest row, no less than that row's time per token (belowTable).
func (g *profileGroup) at(n float64) float64 {
	proportional := g.seconds[0] * n / g.newTokens[0]
	if len(g.newTokens) == 1 {
		return proportional
	}
	i := segment(len(g.newTokens), func(k int) float64 { return g.newTokens[k] }, n)
	t := (n - g.newTokens[i]) / (g.newTokens[i+1] - g.newTokens[i])
	line := lerp(g.seconds[i], g.seconds[i+1], t)
	if n < g.newTokens[0] {
		return belowTable(line, proportional)
	}
	return line
}

// belowTable is a group's time below its smallest row: the larger of the line through its two
// smallest rows and the smallest row's time per token. A prefill's time grows faster than its
// tokens (attention's pairs grow with their square), so the line through two rows, extended to
// fewer tokens, falls below the cost and reaches zero at a positive size: a free prefill of a
// short prompt. A real prefill's time per token does not fall below a small row's as its prompt
// shrinks further, since the step's fixed costs (the weights' reads, the launches, the
// collectives) are shared by fewer tokens. Measured: SGLang's GLM-5.2-FP8 on 8 x H20-3e
// (PUBLISHED.md, "Leave one out"), its 4K-token time predicted from its 32K and 64K rows: the
// line gives 28% too little, the time per token 9.6% too little.
func belowTable(line, proportional float64) float64 { return max(line, proportional) }

// segment is the index i of the pair [x(i), x(i+1)] of an ascending sequence of count >= 2 values
// that brackets v, or the first or last pair when v is outside them (the pair the line is extended
// from).
func segment(count int, x func(int) float64, v float64) int {
	i := 0
	for i+2 < count && x(i+1) < v {
		i++
	}
	return i
}

// lerp is a + (b - a) t in the form exact at both ends: t = 0 gives a and t = 1 gives b, bit for
// bit, so the profile returns its rows' times exactly.
func lerp(a, b, t float64) float64 { return a*(1-t) + b*t }
