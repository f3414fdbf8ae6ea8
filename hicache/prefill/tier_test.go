package prefill

import (
	"math"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/sizing"
)

// TestBreakEvenDenseGQANeedsAFasterTier: on the same GPUs in the same precision (bf16, a claim
// about KV bytes per FLOP), Llama-3.1-70B (320 KiB of KV a token for about 140 GFLOPs) needs a
// faster tier than DeepSeek-V3 (68.6 KiB for about 74 GFLOPs plus MLA's wider attention), by more
// than twice at every prefix length; and for both the rate falls as the prefix grows (attention
// grows with the prefix, the KV does not). In its served fp8 DeepSeek-V3 recomputes faster and the
// gap narrows (TestBreakEvenTable prints both).
func TestBreakEvenDenseGQANeedsAFasterTier(t *testing.T) {
	llama := rooflineIn(t, "llama-3.1-70b", "h100", 8, "bf16")
	deepseek := rooflineIn(t, "deepseek-v3", "h100", 8, "bf16")
	prevLlama, prevDeepseek := math.Inf(1), math.Inf(1)
	for _, p := range []int64{256, 1024, 4096, 32768, 131072} {
		l := BreakEvenBytesPerSecond(llama, llama.Model.TokenBytes(), p)
		d := BreakEvenBytesPerSecond(deepseek, deepseek.Model.TokenBytes(), p)
		if l < 2*d || l >= prevLlama || d >= prevDeepseek {
			t.Errorf(
				"prefix %d: llama-3.1-70b %.3g B/s (before %.3g), deepseek-v3 %.3g (before %.3g)",
				p,
				l,
				prevLlama,
				d,
				prevDeepseek,
			)
		}
		prevLlama, prevDeepseek = l, d
	}
	if !math.IsInf(BreakEvenBytesPerSecond(llama, 1, 0), 1) {
		t.Error("an empty prefix: a finite break-even rate")
	}
}

// TestBreakEvenIsKVOverRecompute: loading the prefix at the break-even rate takes exactly its
// recompute time.
func TestBreakEvenIsKVOverRecompute(t *testing.T) {
	r := roofline(t, "llama-3.1-8b", "b200", 2)
	kv, p := r.Model.TokenBytes(), int64(8192)
	rate := BreakEvenBytesPerSecond(r, kv, p)
	if load, recompute := LoadSeconds(kv*p, rate), r.RecomputeSeconds(p); math.Abs(
		load-recompute,
	) > 1e-12*recompute {
		t.Errorf("load at the break-even rate %v s, recompute %v s", load, recompute)
	}
	if LoadSeconds(0, 1) != 0 || LoadSeconds(1<<30, 1<<30) != 1 {
		t.Error("LoadSeconds")
	}
	if got := HostLinkBytesPerSecond(r.GPU, 8); got != 8*64e9 {
		t.Errorf("8 GPUs' host links: %v B/s", got)
	}
}

// TestRatesNameTheirFlag: rates parse in byte units with an optional "/s"; a bad or non-positive
// one names its flag.
func TestRatesNameTheirFlag(t *testing.T) {
	for in, want := range map[string]float64{"40GiB/s": 40 << 30, "25GB/s": 25e9, " 1e9 ": 1e9, "512MiB": 512 << 20} {
		if got, err := ParseRate("l3-read-rate", in); err != nil || got != want {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "fast", "-1GB/s", "0"} {
		if _, err := ParseRate("l3-read-rate", in); !isFlagError(err, "l3-read-rate") {
			t.Errorf("%q: %v, want an invalid --l3-read-rate", in, err)
		}
	}
	for _, v := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if err := CheckL3ReadRate(v); !isFlagError(err, "l3-read-rate") {
			t.Errorf("%v: %v", v, err)
		}
	}
	if CheckL3ReadRate(DefaultL3ReadBytesPerSecond) != nil {
		t.Error("the default L3 read rate is refused")
	}
}

// TestRatesBelowTheFloorAreRefused: a rate below MinRateBytesPerSecond (1 MB/s) is a unit left
// off, not a link: --host-link-rate 5 (5 B/s) once modelled an L2 load-back of years and hung the
// run, and 35 meant as GB/s did the same. Each such rate is refused naming its flag, with the floor,
// and a bare number with the unit it was likely meant in; the floor itself is taken, and the
// checks of a value (Check*Rate, a configuration built without the flag's text) refuse it too.
func TestRatesBelowTheFloorAreRefused(t *testing.T) {
	for _, flag := range []string{"host-link-rate", "l3-read-rate"} {
		for in, hint := range map[string]string{
			"5": "did you mean 5GB/s?", "35": "did you mean 35GB/s?", " 1.5 ": "did you mean 1.5GB/s?",
			"999999": "did you mean 999999GB/s?", "500KB/s": "", "900KiB": "",
		} {
			_, err := ParseRate(flag, in)
			if !isFlagError(err, flag) {
				t.Fatalf("--%s %q: %v, want an invalid --%s", flag, in, err, flag)
			}
			for _, want := range []string{"1MB/s", hint} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("--%s %q: %q says nothing of %q", flag, in, err, want)
				}
			}
			if hint == "" && strings.Contains(err.Error(), "did you mean") {
				t.Errorf("--%s %q: %q guesses a unit for a rate that has one", flag, in, err)
			}
		}
		for in, want := range map[string]float64{"1MB/s": 1e6, "1000000": 1e6, "35GB/s": 35e9} {
			if got, err := ParseRate(flag, in); err != nil || got != want {
				t.Errorf("--%s %q: %v %v, want %v", flag, in, got, err, want)
			}
		}
	}
	if err := CheckHostLinkRate(999_999); !isFlagError(err, "host-link-rate") {
		t.Errorf("a host link of 999,999 B/s: %v", err)
	}
	if err := CheckL3ReadRate(5); !isFlagError(err, "l3-read-rate") {
		t.Errorf("an L3 of 5 B/s: %v", err)
	}
	if CheckHostLinkRate(MinRateBytesPerSecond) != nil ||
		CheckL3ReadRate(MinRateBytesPerSecond) != nil {
		t.Error("the floor itself is refused")
	}
}

// TestSummaryLinesSayModelledAndWhetherATierPays: every line is labelled modelled; a tier faster
// than the break-even rate pays, a slower one is said to be slower than recomputing.
func TestSummaryLinesSayModelledAndWhetherATierPays(t *testing.T) {
	r := roofline(t, "llama-3.1-70b", "h100", 8)
	lines := SummaryLines(
		r,
		r.Model.TokenBytes(),
		[]int64{4096},
		TierRates{
			L2HostBytesPerSecond: HostLinkBytesPerSecond(r.GPU, 8),
			L3ReadBytesPerSecond: 1e9,
		},
	)
	if len(lines) != 2 {
		t.Fatalf("%q", lines)
	}
	for _, line := range lines {
		if !strings.HasPrefix(line, "modelled ") {
			t.Errorf("not labelled modelled: %s", line)
		}
	}
	if !strings.Contains(lines[1], "4096-token prefix") || !strings.Contains(lines[1], "L2 host link 477 GiB/s") ||
		!strings.Contains(lines[1], ": pays)") ||
		!strings.Contains(lines[1], "L3 read 954 MiB/s") ||
		!strings.Contains(lines[1], "slower than recomputing") {
		t.Errorf("%s", lines[1])
	}
	t.Logf("%s", strings.Join(lines, "\n"))
}

// TestBreakEvenTable prints PREFILL.md's table of break-even rates ("Where a tier pays") and holds
// its claims: on 8 H100s every model's break-even rate is far below the group's host links and a
// dense GQA model's is over twice DeepSeek-V3's.
func TestBreakEvenTable(t *testing.T) {
	for _, name := range sizing.ModelNames() {
		r := roofline(t, name, "h100", 8)
		link := HostLinkBytesPerSecond(r.GPU, 8)
		for _, p := range []int64{4096, 32768} {
			rate := BreakEvenBytesPerSecond(r, r.Model.TokenBytes(), p)
			t.Logf(
				"%-14s prefix %6d: recompute %7.0f tokens/s, break-even %6.2f GB/s (host links %.0f GB/s, L3 %.1f GB/s)",
				name,
				p,
				float64(p)/r.RecomputeSeconds(p),
				rate/1e9,
				link/1e9,
				DefaultL3ReadBytesPerSecond/1e9,
			)
			if rate > link/10 {
				t.Errorf(
					"%s at %d: break-even %.3g B/s is not far below the host links' %.3g",
					name,
					p,
					rate,
					link,
				)
			}
		}
	}
}
