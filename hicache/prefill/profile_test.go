package prefill

import (
	"errors"
	"io"
	"math"
	"strings"
	"testing"
)

// A profile over two cached-token counts, in CSV and whitespace with comments.
const testProfile = `# new_tokens cached_tokens milliseconds, measured on 8 x h100
1024, 0, 100
4096, 0, 400   # four times the tokens, four times the time
1024 4096 150

4096	4096	700
`

func parseTestProfile(t *testing.T, text string) *Profile {
	t.Helper()
	p, err := ParseProfile("prof.txt", strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestProfileIsExactAtItsRows: every row's time comes back bit for bit.
func TestProfileIsExactAtItsRows(t *testing.T) {
	p := parseTestProfile(t, testProfile)
	for _, row := range [][3]float64{{1024, 0, 0.1}, {4096, 0, 0.4}, {1024, 4096, 0.15}, {4096, 4096, 0.7}} {
		if got := p.Seconds(int64(row[0]), int64(row[1])); got != row[2] {
			t.Errorf("new %v cached %v: %v s, the row says %v", row[0], row[1], got, row[2])
		}
	}
}

// TestProfileInterpolatesAndExtrapolates: linear in new tokens within a cached-token group, linear
// across groups, extended linearly beyond the table, below a group's fewest new tokens no less than
// its smallest row's time per token, never below zero.
func TestProfileInterpolatesAndExtrapolates(t *testing.T) {
	p := parseTestProfile(t, testProfile)
	for _, tc := range []struct {
		newTokens, cachedTokens int64
		want                    float64
	}{
		{2560, 0, 0.25},      // halfway along the cached-0 row pair
		{1024, 2048, 0.125},  // halfway between the groups
		{2560, 2048, 0.3375}, // both: (0.25 + 0.425) / 2
		{8192, 0, 0.8},       // beyond the largest new tokens: the line through 1024 and 4096
		{1024, 8192, 0.2},    // beyond the largest cached tokens: 0.1 + 2 x 0.05
		{1, 0, 0.1 / 1024},   // below the smallest: the same line, which passes through 0
		// below the smallest of cached 4096 (150 ms, 700 ms): the line would cross zero at 745
		// new tokens; the smallest row's time per token instead
		{512, 4096, 0.150 / 2},
	} {
		if got := p.Seconds(tc.newTokens, tc.cachedTokens); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("new %d cached %d: %v s, want %v", tc.newTokens, tc.cachedTokens, got, tc.want)
		}
	}
	steep := parseTestProfile(t, "100 0 10\n200 0 60\n")
	if got := steep.Seconds(1, 0); math.Abs(got-0.0001) > 1e-15 {
		t.Errorf("a line that crosses zero: %v s, want the 100-token row's time per token, 0.0001", got)
	}
	for _, n := range []int64{1, 10, 50, 99} {
		if got, line := steep.Seconds(n, 0), 0.010+(float64(n)-100)*0.0005; got < line {
			t.Errorf("below the table at %d: %v s, less than the line's %v", n, got, line)
		}
	}
	rising := parseTestProfile(t, "100 1000 10\n100 2000 60\n")
	if got := rising.Seconds(100, 0); got != 0 {
		t.Errorf("a line in cached tokens that crosses zero: %v s, want 0", got)
	}
	if p.Seconds(0, 100) != 0 || p.BatchSeconds(nil) != 0 {
		t.Error("no new tokens cost time")
	}
}

// TestProfileOfOneRowOrOneGroup: one row scales with new tokens; one cached-token group ignores
// cached tokens.
func TestProfileOfOneRowOrOneGroup(t *testing.T) {
	one := parseTestProfile(t, "1000 0 20\n")
	if got := one.Seconds(3000, 500); math.Abs(got-0.06) > 1e-15 {
		t.Errorf("one row: %v s for three times its tokens, want 0.06", got)
	}
	group := parseTestProfile(t, "1000 0 20\n2000 0 50\n")
	if group.Seconds(1500, 9999) != group.Seconds(1500, 0) {
		t.Error("one cached-token group: the cached tokens changed the time")
	}
}

// TestProfileBatchIsTheProfileOfItsTotals: a batch costs the profile of its summed new and cached
// tokens.
func TestProfileBatchIsTheProfileOfItsTotals(t *testing.T) {
	p := parseTestProfile(t, testProfile)
	batch := []Request{{1024, 1024}, {1536, 1024}, {0, 99999}}
	if got, want := p.BatchSeconds(batch), p.Seconds(2560, 2048); got != want {
		t.Errorf("batch %v s, the profile of its totals %v", got, want)
	}
	if !strings.Contains(
		p.Describe(),
		"prof.txt, 4 rows, new tokens 1024 to 4096, cached tokens 0 to 4096",
	) {
		t.Errorf("describe: %s", p.Describe())
	}
}

// TestProfileErrorsNameFileAndLine: each malformed line is an invalid --prefill-profile naming
// file:line.
func TestProfileErrorsNameFileAndLine(t *testing.T) {
	for text, want := range map[string]string{
		"# header\n1024 0\n":       "prof.txt:2: 2 fields",
		"1024 0 10\n\n1024 0 12\n": "prof.txt:3: new 1024 cached 0 again (line 1 has it)",
		"0 0 10\n":                 "prof.txt:1: new_tokens \"0\"",
		"1.5 0 10\n":               "prof.txt:1: new_tokens \"1.5\"",
		"10 -1 10\n":               "prof.txt:1: cached_tokens \"-1\"",
		"10 0 0\n":                 "prof.txt:1: milliseconds \"0\"",
		"10 0 NaN\n":               "prof.txt:1: milliseconds \"NaN\"",
		"10 0 +Inf\n":              "prof.txt:1: milliseconds \"+Inf\"",
		"10 0 2e9\n":               "prof.txt:1: milliseconds \"2e9\" is not a number > 0 and <= 1e+09",
		"10 0 ten\n":               "prof.txt:1: milliseconds \"ten\"",
		"10 0 1 2\n":               "prof.txt:1: 4 fields",
		"# only a comment\n\n":     "prof.txt: no rows",
	} {
		_, err := ParseProfile("prof.txt", strings.NewReader(text))
		if !isFlagError(err, "prefill-profile") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an invalid --prefill-profile with %q", text, err, want)
		}
	}
}

// TestProfileThatFallsAsTokensGrowIsRefused: a row faster than one with fewer new tokens at its
// cached count, or with fewer cached tokens at its new count, is refused, naming both lines;
// extended, such a table reaches a free prefill (an infinite break-even rate). Equal times are a
// flat profile, kept.
func TestProfileThatFallsAsTokensGrowIsRefused(t *testing.T) {
	for text, want := range map[string]string{
		"1024 0 50\n2048 0 1\n":                "prof.txt:2: 1 ms at 2048 new tokens, less than line 1's 50 ms at 1024",
		"2048 0 1\n1024 0 50\n":                "prof.txt:1: 1 ms at 2048 new tokens, less than line 2's 50 ms at 1024",
		"1024 0 50\n1024 4096 40\n2048 0 60\n": "prof.txt:2: 40 ms at 4096 cached tokens, less than line 1's 50 ms at 0",
	} {
		_, err := ParseProfile("prof.txt", strings.NewReader(text))
		if !isFlagError(err, "prefill-profile") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an invalid --prefill-profile with %q", text, err, want)
		}
	}
	// A fall inside the table (noise near the latency floor) is interpolated, not extended: it is
	// kept.
	noisy := parseTestProfile(
		t,
		"512 0 10.2\n1024 0 10.1\n2048 0 20\n512 512 10.3\n1024 512 10.2\n2048 512 21\n512 4096 11\n1024 4096 12\n2048 4096 22\n",
	)
	if s := noisy.RecomputeSeconds(1024); s <= 0 {
		t.Errorf("a profile with noise inside it: %v s at 1024 tokens", s)
	}
	flat := parseTestProfile(t, "1024 0 50\n2048 0 50\n1024 512 50\n")
	if s := flat.RecomputeSeconds(8192); math.Abs(s-0.05) > 1e-12 {
		t.Errorf("a flat profile: %v s at 8192 tokens, want its rows' 0.05", s)
	}
}

// TestNewChoosesTheProfileOverTheRoofline: a profile path gives the profile (opened through Open);
// a missing file names the flag; no path gives the roofline.
func TestNewChoosesTheProfileOverTheRoofline(t *testing.T) {
	open := func(path string) (io.ReadCloser, error) {
		if path != "prof.txt" {
			return nil, errors.New("open " + path + ": no such file or directory")
		}
		return io.NopCloser(strings.NewReader(testProfile)), nil
	}
	opts := Options{
		Model:       "llama-3.1-70b",
		GPU:         "h100",
		GroupGPUs:   8,
		Efficiency:  DefaultEfficiency,
		ProfilePath: "prof.txt",
		Open:        open,
	}
	if m, err := New(opts); err != nil || !strings.HasPrefix(m.Describe(), "profile: prof.txt") {
		t.Errorf("with a profile: %v %v", m, err)
	}
	opts.ProfilePath = "missing.txt"
	if m, err := New(opts); !isFlagError(err, "prefill-profile") || m != nil ||
		!strings.Contains(err.Error(), "missing.txt") {
		t.Errorf("a missing profile: %v %v", m, err)
	}
	opts.ProfilePath = ""
	if m, err := New(opts); err != nil ||
		!strings.HasPrefix(m.Describe(), "roofline: llama-3.1-70b in bf16 (its served precision) on 8 x h100") {
		t.Errorf("without a profile: %v %v", m, err)
	}
	opts.GPU = "v100"
	if m, err := New(opts); !isFlagError(err, "gpu") || m != nil {
		t.Errorf("a bad GPU: %v %v", m, err)
	}
}

// FuzzParseProfile: any text either fails as an invalid --prefill-profile or gives a profile whose
// every answer is a finite time >= 0 (no panic, no NaN from a zero-width segment: duplicate rows
// are refused).
func FuzzParseProfile(f *testing.F) {
	f.Add(testProfile, int64(3000), int64(100))
	f.Add("1 0 1\n2 0 1\n1 1 1\n", int64(1), int64(5))
	f.Add("5,7,0.5 # c\n", int64(1<<40), int64(1<<40))
	f.Fuzz(func(t *testing.T, text string, newTokens, cachedTokens int64) {
		p, err := ParseProfile("fuzz.txt", strings.NewReader(text))
		if err != nil {
			if !isFlagError(err, "prefill-profile") {
				t.Fatalf("%q: %v, not an invalid --prefill-profile", text, err)
			}
			return
		}
		newTokens, cachedTokens = abs(newTokens)%(1<<30), abs(cachedTokens)%(1<<30)
		if s := p.Seconds(newTokens, cachedTokens); math.IsNaN(s) || math.IsInf(s, 0) || s < 0 {
			t.Fatalf("%q at new %d cached %d: %v s", text, newTokens, cachedTokens, s)
		}
	})
}
