package cli

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/cphicache/cphicache/hicache/sweep"
	"github.com/cphicache/cphicache/internal/errscope"
)

// sweepServingFlags are a small sweep with the serving clock: sweepWorkload on an L1 of 256 pages
// at three L2 sizes, DeepSeek-V3 on modelled H100s at 200 requests a second.
var sweepServingFlags = append([]string{"--device-pages", "256", "--l2-slots", "16,64,1024",
	"--gpu", "h100", "--prefill-model", "deepseek-v3", "--request-rate", "200"}, sweepWorkload...)

var updateSweepGolden = flag.Bool("update-sweep-golden", false,
	"rewrite testdata/sweep_default.golden from the binary under test (CPHICACHE_BIN: main's)")

// wallSeconds is a point line's wall time, the one figure of a sweep's output that is the
// machine's.
var wallSeconds = regexp.MustCompile(`(ideal [0-9.]+%), [0-9.]+ s`)

// TestSweepWithoutAPolicyIsUnchanged: a sweep given no --l2-policy prints what it printed before
// sweeps compared policies (testdata/sweep_default.golden, written by the binary of that main:
// CPHICACHE_BIN=its binary go test ./cli -run TestSweepWithoutAPolicyIsUnchanged
// -update-sweep-golden; rewritten since, by this package's binary, where the sweep's output changed
// on purpose: its L1 lines and the per-rank copies' L1 of whole copies, and the one quantile method
// of the load's replicas), from its first line after the provenance to its answer, wall times
// masked; and its JSON has no policy, curve or bound.
func TestSweepWithoutAPolicyIsUnchanged(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	out := singleton(t, append([]string{"sweep", "--json", path}, sweepServingFlags...)...)
	out = out[strings.Index(out, "# cphicache sweep:"):]
	out = wallSeconds.ReplaceAllString(out, "$1, (wall) s")
	golden := filepath.Join("testdata", "sweep_default.golden")
	if *updateSweepGolden {
		if err := os.WriteFile(golden, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("a sweep without --l2-policy prints otherwise than before:\n%s\nwant:\n%s", out, want)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"policies"`, `"offline_bound"`, `"policy"`} {
		if strings.Contains(string(b), key) {
			t.Errorf("the JSON of a sweep without --l2-policy has %s", key)
		}
	}
}

// TestSweepComparesPolicies: with --l2-policy all, every size runs each policy on the shared pool,
// in the lines and the JSON, beside the OFFLINE bound at L1's pages + the L2's slots, which no
// point of any policy or design passes and which is below the ideal where the L2 is small (so the
// comparison is not the ideal's); the policies do not all hit alike; and each policy has its
// recommended size, the smallest on its curve within the margin of its best TTFT p50; the answer
// names the first policy, whose curve it chose from, and the configuration records all, as given.
func TestSweepComparesPolicies(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	out := singleton(t, append([]string{"sweep", "--json", path, "--plot",
		filepath.Join(t.TempDir(), "s.png"), "--l2-policy", "all"}, sweepServingFlags...)...)
	for _, want := range []string{
		"# L2 policies compared on the shared pool at every size: lru, slru, admit_seen",
		"(16 slots), lru: hit", "(16 slots), slru: hit", "(16 slots), admit_seen: hit",
		"a rank's pool of 32 tokens (2 slots), a GPU's L1 of 512 tokens, whole copies (SHORTER",
		"are computed and never cached), lru: hit", "  OFFLINE bound at L1 + L2 = 272 pages: hit",
		"MODELLED TTFT at its hits, loaded at no cost (not a bound on TTFT): p50",
		"  under lru: the L2 to buy", "  under slru: the L2 to buy", "  under admit_seen: the L2 to buy",
		"  the L2 to buy under lru (the first --l2-policy listed; each policy's own follows): ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the sweep lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "  OFFLINE bound at L1 + L2 = "); n != 3 {
		t.Errorf("%d OFFLINE bound lines, want one a size:\n%s", n, out)
	}
	var res sweep.Result
	readJSON(t, path, &res)
	checkPolicyCurves(t, &res)
	if res.Answer.Policy != "lru" || res.Provenance.Config["l2-policy"] != "all" {
		t.Errorf("the answer under %q, --l2-policy recorded as %q: want lru, and all as given",
			res.Answer.Policy, res.Provenance.Config["l2-policy"])
	}
}

// checkPolicyCurves holds a sweep of every policy at three sizes to TestSweepComparesPolicies'
// claims.
func checkPolicyCurves(t *testing.T, res *sweep.Result) {
	t.Helper()
	if len(res.Policies) != 3 || len(res.OfflineBound) != 3 || len(res.Points) != 3 {
		t.Fatalf("%d curves, %d bounds, %d points: want 3 policies at 3 sizes", len(res.Policies),
			len(res.OfflineBound), len(res.Points))
	}
	differ := false
	for i, b := range res.OfflineBound {
		if b.CapacityPages != res.DevicePages+res.Points[i].L2Slots || b.Serving == nil ||
			b.L2Slots != res.Points[i].L2Slots {
			t.Errorf("size %d: bound %+v, want it at %d L1 pages + %d slots, with its TTFT", i, b,
				res.DevicePages, res.Points[i].L2Slots)
		}
		points := []sweep.Point{res.PerRank[i]}
		for k, c := range res.Policies {
			p := c.Points[i]
			points = append(points, p)
			if p.Policy != c.Policy || p.L2Slots != b.L2Slots {
				t.Errorf("%s's point %d: %+v", c.Policy, i, p)
			}
			differ = differ || p.L1Tokens+p.L2HitTokens !=
				res.Policies[0].Points[i].L1Tokens+res.Policies[0].Points[i].L2HitTokens
			if k == 0 && !reflect.DeepEqual(p, res.Points[i]) {
				t.Errorf("point %d: the first policy's %+v, Points' %+v", i, p, res.Points[i])
			}
		}
		for _, p := range points {
			if hits := p.L1Tokens + p.L2HitTokens; hits > b.HitTokens {
				t.Errorf("size %d: %s %s hit %d tokens, over the OFFLINE bound %d", i, p.Design,
					p.Policy, hits, b.HitTokens)
			}
		}
	}
	if first := res.OfflineBound[0]; first.HitTokens >= res.Points[0].IdealTokens {
		t.Errorf("the bound at 16 slots, %d tokens, is the ideal's %d: capacity never binds",
			first.HitTokens, res.Points[0].IdealTokens)
	}
	if !differ {
		t.Errorf("every policy hit alike at every size: the comparison proves little")
	}
	for _, c := range res.Policies {
		checkRecommended(t, c, res.Answer.MarginPct)
	}
}

// checkRecommended: a policy's recommended size is the smallest on its curve whose TTFT p50 is
// within the margin of the curve's best.
func checkRecommended(t *testing.T, c sweep.PolicyCurve, marginPct float64) {
	t.Helper()
	best := c.Points[0].Serving.TTFTP50
	for _, p := range c.Points {
		best = min(best, p.Serving.TTFTP50)
	}
	want := -1
	for i, p := range c.Points {
		if p.Serving.TTFTP50 <= best*(1+marginPct/100) &&
			(want < 0 || p.L2Bytes < c.Points[want].L2Bytes) {
			want = i
		}
	}
	if r := c.Recommended; r == nil || r.Point != want || r.L2Tokens != c.Points[want].L2Tokens {
		t.Errorf("%s recommends %+v, want point %d", c.Policy, r, want)
	}
}

// TestSweepPolicyFlag: sweep's --l2-policy takes all or a list of distinct policies, and compares
// them on the shared pool only: --l2-design per-rank takes one.
func TestSweepPolicyFlag(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		refuse string
	}{
		{[]string{"--l2-policy", "lru,bogus"}, `unknown L2 policy "bogus"`},
		{[]string{"--l2-policy", "slru, slru"}, "slru is listed twice"},
		{[]string{"--l2-policy", "all,lru"}, `unknown L2 policy "all"`},
		{[]string{"--l2-policy", "lru,slru", "--l2-design", "per-rank"}, "--l2-design per-rank"},
		{[]string{"--l2-policy", "slru", "--l2-design", "per-rank"}, ""},
		{[]string{"--l2-policy", "admit_seen,lru"}, ""},
	} {
		app := newApp()
		cmd := sweepCommand()
		cmd.Action = func(*cli.Context) error { return nil } // parse and check only: no job
		app.Commands = []*cli.Command{cmd}
		err := app.Run(append([]string{"cphicache", "sweep", "--l2-slots", "64"}, tc.args...))
		var ce *errscope.ConfigError
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%v: %v", tc.args, err)
		case tc.refuse != "" && (!errors.As(err, &ce) || ce.Flag != "l2-policy" ||
			!strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%v: error %v, want an invalid --l2-policy saying %q", tc.args, err, tc.refuse)
		}
	}
}
