package prefill

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// DefaultL3ReadBytesPerSecond is --l3-read-rate's default, one node's read rate from its L3: 40
// GiB/s, the peak KV cache read rate DeepSeek's 3FS reports for its clients, each behind one 400
// Gbps NIC (3FS README, "KVCache"; 400 Gbps carries 46.6 GiB/s, so 40 GiB/s is a node's). A local
// array of six to eight PCIe Gen4 NVMe drives (about 7 GB/s each sequentially) reads about as fast;
// one drive, a sixth of it.
const DefaultL3ReadBytesPerSecond = 40 << 30

// LoadSeconds is the time to move bytes at bytesPerSecond: a load-back from the L2 at the host
// link's rate, or an L3 read at the L3's. It is the floor of the real copy (no latency, no
// contention).
func LoadSeconds(bytes int64, bytesPerSecond float64) float64 {
	if bytes <= 0 {
		return 0
	}
	return float64(bytes) / bytesPerSecond
}

// HostLinkBytesPerSecond is the group's host-to-device rate at the GPU's datasheet rate: each GPU
// loads its own part of the KV over its own link, so the group's rate is groupGPUs links'.
func HostLinkBytesPerSecond(g GPU, groupGPUs int) float64 {
	return float64(groupGPUs) * g.HostBytesPerSecond
}

// HostLink is the rate one GPU's host link moves KV at, each way (a load-back host to device, a
// backup device to host), and where it comes from: the --gpu row's datasheet, or the user's own
// measurement (--host-link-rate).
type HostLink struct {
	BytesPerSecond float64
	// Given is --host-link-rate as the user wrote it; "" when the rate is the datasheet's.
	Given string
	GPU   GPU
}

// NewHostLink is g's host link at the rate --host-link-rate gave (bytesPerSecond, written as
// given), or at its datasheet's rate when given is "".
func NewHostLink(g GPU, bytesPerSecond float64, given string) HostLink {
	if given == "" {
		return HostLink{BytesPerSecond: g.HostBytesPerSecond, GPU: g}
	}
	return HostLink{BytesPerSecond: bytesPerSecond, Given: given, GPU: g}
}

// Describe says the rate and its origin, for the summary and the report.
func (h HostLink) Describe() string {
	rate := strconv.FormatFloat(h.BytesPerSecond/1e9, 'g', 4, 64) + " GB/s"
	if h.Given != "" {
		return fmt.Sprintf(
			"host link %s each way a GPU (--host-link-rate %s: the user's measurement; "+
				"%s's datasheet: %s, %s GB/s)",
			rate,
			h.Given,
			h.GPU.Name,
			h.GPU.HostLink,
			strconv.FormatFloat(h.GPU.HostBytesPerSecond/1e9, 'g', 4, 64),
		)
	}
	return fmt.Sprintf(
		"host link %s each way a GPU (%s, %s's datasheet rate)",
		rate,
		h.GPU.HostLink,
		h.GPU.Name,
	)
}

// CheckHostLinkRate refuses a --host-link-rate that is not a number of bytes per second of at
// least MinRateBytesPerSecond.
func CheckHostLinkRate(bytesPerSecond float64) error {
	return checkRate("host-link-rate", bytesPerSecond)
}

// MinRateBytesPerSecond is the floor of --host-link-rate and --l3-read-rate: 1 MB/s. Below it a
// rate is a unit left off ("35" for 35GB/s is 35 bytes/s), not a link: the slowest path a KV tier
// uses, a 1 Gb/s network or one hard disk, moves over 100 MB/s; at 1 MB/s one 100K-token
// Llama-3.1-8B prompt's KV (13.1 GB) already takes 3.6 hours to load, and at 5 bytes/s 83 years,
// a modelled wait the serving clock would spend on the wall.
const MinRateBytesPerSecond = 1e6

// checkRate refuses a rate flag's value below MinRateBytesPerSecond, or not a finite number.
func checkRate(flag string, bytesPerSecond float64) error {
	if !(bytesPerSecond >= MinRateBytesPerSecond) || math.IsInf(bytesPerSecond, 0) {
		return &errscope.ConfigError{
			Flag: flag,
			Reason: fmt.Sprintf(
				"%v bytes/s is not a rate of at least 1MB/s (%s)",
				bytesPerSecond,
				rateFloorWhy,
			),
		}
	}
	return nil
}

// rateFloorWhy says why a rate below MinRateBytesPerSecond is refused, for its messages and
// --help.
const rateFloorWhy = "a slower rate is a unit left off, not a link: a 1 Gb/s network or one " +
	"hard disk moves over 100 MB/s"

// BreakEvenBytesPerSecond is the rate at which loading a prefix's KV takes as long as recomputing
// it: the model's KV bytes per token over its modelled prefill seconds per token, for a prefix of
// prefixTokens prefilled from nothing (Model.RecomputeSeconds). A tier that delivers KV faster than
// this beats recomputing; slower, and recomputing is faster. The longer the prefix, the lower the
// rate (attention grows quadratically while the KV grows linearly). A dense GQA model's KV is
// larger per FLOP than an MLA model's, so it needs a faster tier. Infinite for an empty prefix:
// nothing to recompute, so no tier is fast enough to matter.
func BreakEvenBytesPerSecond(m Model, kvTokenBytes, prefixTokens int64) float64 {
	s := m.RecomputeSeconds(prefixTokens)
	if prefixTokens <= 0 || s <= 0 {
		return math.Inf(1)
	}
	return float64(kvTokenBytes) * float64(prefixTokens) / s
}

// ParseRate reads a rate flag in bytes per second: a byte size with an optional "/s" ("40GiB/s",
// "25GB/s", "1e9"), at least MinRateBytesPerSecond; the error names the flag, and for a bare
// number below the floor suggests it in GB/s ("35": did you mean 35GB/s?).
func ParseRate(flag, s string) (float64, error) {
	text := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	bytes, err := sizing.ParseByteSize(flag, text)
	if err != nil {
		return 0, err
	}
	if float64(bytes) >= MinRateBytesPerSecond {
		return float64(bytes), nil
	}
	hint := ""
	if _, bare := strconv.ParseFloat(text, 64); bare == nil {
		hint = fmt.Sprintf("; a number without a unit is bytes per second: did you mean %sGB/s?", text)
	}
	return 0, &errscope.ConfigError{
		Flag: flag,
		Reason: fmt.Sprintf(
			"%q is %d bytes/s, below the floor of 1MB/s (%s)%s",
			s,
			bytes,
			rateFloorWhy,
			hint,
		),
	}
}

// CheckL3ReadRate refuses an --l3-read-rate that is not a number of bytes per second of at least
// MinRateBytesPerSecond.
func CheckL3ReadRate(bytesPerSecond float64) error {
	return checkRate("l3-read-rate", bytesPerSecond)
}

// TierRates are the rates the summary sets beside the break-even rate, in bytes per second: the
// group's L2 host link (HostLinkBytesPerSecond, or --host-link-rate's) and the L3's read rate (a
// node's, --l3-read-rate); 0 leaves a tier out. HostLink says one GPU's link and where its rate
// comes from (HostLink.Describe); "" says nothing.
type TierRates struct {
	L2HostBytesPerSecond, L3ReadBytesPerSecond float64
	HostLink                                   string
}

// SummaryLines gives the summary's lines: the model, then for each prefix length the break-even
// rate beside each tier's, with whether the tier pays. Every number is labelled modelled.
func SummaryLines(m Model, kvTokenBytes int64, prefixTokens []int64, rates TierRates) []string {
	first := "modelled prefill: " + m.Describe()
	if rates.HostLink != "" {
		first += "; " + rates.HostLink
	}
	lines := []string{first}
	for _, p := range prefixTokens {
		s := m.RecomputeSeconds(p)
		breakEven := BreakEvenBytesPerSecond(m, kvTokenBytes, p)
		line := fmt.Sprintf(
			"modelled break-even KV rate, %d-token prefix: %s (KV %s a token, recomputed at %.0f tokens/s)",
			p,
			formatRate(breakEven),
			formatBytes(float64(kvTokenBytes)),
			float64(p)/s,
		)
		line += tierVerdict("L2 host link", rates.L2HostBytesPerSecond, breakEven)
		line += tierVerdict("L3 read", rates.L3ReadBytesPerSecond, breakEven)
		lines = append(lines, line)
	}
	return lines
}

// tierVerdict is ", NAME R (x times: pays)" or "(...: slower than recomputing)"; "" for a rate of
// 0.
func tierVerdict(name string, rate, breakEven float64) string {
	if rate <= 0 {
		return ""
	}
	verdict := "pays"
	if rate < breakEven {
		verdict = "slower than recomputing"
	}
	return fmt.Sprintf("; %s %s (%.2gx: %s)", name, formatRate(rate), rate/breakEven, verdict)
}

func formatRate(bytesPerSecond float64) string { return formatBytes(bytesPerSecond) + "/s" }

// formatBytes prints bytes in binary units, as the rest of the summary does
// (sizing.FormatByteAmount).
func formatBytes(b float64) string { return sizing.FormatByteAmount(b, 3) }
