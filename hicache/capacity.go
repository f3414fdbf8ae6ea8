package hicache

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/cphicache/cphicache/hicache/spmd"
)

// Capacities in bytes (--l2-bytes per node, --device-bytes per rank) and a model's size (--model) become the
// geometry flags' values here, once the CP size and the ranks per node are known (Options.Size). Bytes are
// counted at the model's real bytes per token even when the copies are scaled down (--copy-token-bytes): the
// capacity in tokens, and so every hit count, is the real model's, while the slab holds fewer bytes.

// byteUnits are the suffixes a size takes: binary (KiB) and decimal (KB, kB) multiples, and plain bytes.
var byteUnits = []struct {
	suffix string
	bytes  float64
}{
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"kB", 1e3}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
}

// ParseByteSize reads a size such as 512GiB, 1.5TiB, 64GB or 4096 (bytes); the error names flag.
func ParseByteSize(flag, s string) (int64, error) {
	text := strings.TrimSpace(s)
	unit := 1.0
	for _, u := range byteUnits {
		if number, ok := strings.CutSuffix(text, u.suffix); ok {
			text, unit = strings.TrimSpace(number), u.bytes
			break
		}
	}
	v, err := strconv.ParseFloat(text, 64)
	bytes := v * unit
	if err != nil || math.IsNaN(bytes) || bytes < 1 || bytes >= math.MaxInt64 {
		return 0, &spmd.ConfigError{Flag: flag, Reason: fmt.Sprintf("%q is not a size: give a positive number of bytes with a unit, e.g. 512GiB, 1.5TiB, 64GB, 4096 (B, KiB, MiB, GiB, TiB, or KB to TB in powers of 1000)", s)}
	}
	return int64(bytes), nil
}

// ParseByteSizes reads a comma-separated list of sizes (sweep's --l2-bytes).
func ParseByteSizes(flag, s string) ([]int64, error) {
	var sizes []int64
	for _, item := range strings.Split(s, ",") {
		v, err := ParseByteSize(flag, item)
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, v)
	}
	return sizes, nil
}

// FormatBytes writes a byte count in the largest binary unit that keeps it at 1 or more, to 4 significant
// digits (1.5 TiB, 320 KiB).
func FormatBytes(bytes int64) string {
	for _, u := range []struct {
		name string
		size int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if bytes >= u.size {
			return fmt.Sprintf("%.4g %s", float64(bytes)/float64(u.size), u.name)
		}
	}
	return fmt.Sprintf("%d B", bytes)
}

// Size returns the options with the model and the byte capacities turned into the geometry for a CP group of
// cp ranks on nodes of ranksPerNode ranks; the options themselves are not changed. Every rank computes the
// same, so an error is the same on every rank (it names its flag).
func (o *Options) Size(cp, ranksPerNode int) (*Options, error) {
	s := *o
	if o.Model != "" {
		m, err := LookupModel(o.Model)
		if err != nil {
			return nil, err
		}
		s.Layers, s.PayloadsPerLayer, s.TokenBytes = m.Layers, m.Payloads, m.RankTokenBytes(cp)
	}
	s.accountTokenBytes = s.TokenBytes
	if o.CopyTokenBytes > 0 {
		if o.CopyTokenBytes > s.accountTokenBytes {
			return nil, &spmd.ConfigError{Flag: "copy-token-bytes", Reason: fmt.Sprintf("%d is more than the %d bytes per token per rank per layer per payload it stands in for: it can only copy fewer", o.CopyTokenBytes, s.accountTokenBytes)}
		}
		s.TokenBytes = o.CopyTokenBytes
	}
	rankPageBytes := int64(s.PageTokens) * int64(s.Layers) * int64(s.PayloadsPerLayer) * int64(s.accountTokenBytes)
	if o.L2Bytes > 0 {
		groups := int64(max(1, ranksPerNode/cp))
		slotBytes := rankPageBytes * int64(cp)
		slots := o.L2Bytes / groups / slotBytes
		if slots < 1 || slots > math.MaxInt32 {
			return nil, &spmd.ConfigError{Flag: "l2-bytes", Reason: fmt.Sprintf("%d bytes per node, %d bytes for each of its %d CP group(s), make %d slots of %d bytes (a page of %d tokens); give 1 to %d slots", o.L2Bytes, o.L2Bytes/groups, groups, slots, slotBytes, s.PageTokens, math.MaxInt32)}
		}
		s.L2Slots = int(slots)
	}
	if o.DeviceBytes > 0 {
		pages := o.DeviceBytes / rankPageBytes
		if pages < 1 || pages > math.MaxInt32 {
			return nil, &spmd.ConfigError{Flag: "device-bytes", Reason: fmt.Sprintf("%d bytes per rank make %d device pages of %d bytes (a rank's part of a page of %d tokens)", o.DeviceBytes, pages, rankPageBytes, s.PageTokens)}
		}
		s.DevicePages = int(pages)
	}
	return &s, nil
}

// Capacity is each tier's size in tokens and bytes, as the report states it.
type Capacity struct {
	Model string `json:"model,omitempty"`
	// TokenBytes: the KV bytes of one token in the CP group (every rank, layer and payload), by which the bytes
	// below are counted; CopiedTokenBytes: what the run copies per token (less when the copies are scaled).
	TokenBytes       int64 `json:"token_bytes"`
	CopiedTokenBytes int64 `json:"copied_token_bytes"`
	Scaled           bool  `json:"copies_scaled"`
	L2Slots          int   `json:"l2_slots"`
	L2Tokens         int64 `json:"l2_tokens"`        // per CP group
	L2Bytes          int64 `json:"l2_bytes"`         // per CP group, at TokenBytes
	L2SlabBytes      int64 `json:"l2_slab_bytes"`    // per CP group, the shared memory actually mapped
	DevicePages      int   `json:"device_pages"`     // per rank
	DeviceTokens     int64 `json:"device_tokens"`    // per rank: the tokens whose part it holds
	DeviceBytes      int64 `json:"device_bytes"`     // per rank, at TokenBytes
	DeviceBufBytes   int64 `json:"device_buf_bytes"` // per rank, the buffer actually allocated
}

// capacity states the sized options' tiers (after Size) for a CP group of cp ranks.
func (o *Options) capacity(cp int) Capacity {
	account := o.accountTokenBytes
	if account == 0 { // options that did not go through Size: nothing is scaled
		account = o.TokenBytes
	}
	perToken := int64(o.Layers) * int64(o.PayloadsPerLayer)
	c := Capacity{Model: o.Model, TokenBytes: perToken * int64(cp) * int64(account), CopiedTokenBytes: perToken * int64(cp) * int64(o.TokenBytes),
		Scaled: account != o.TokenBytes, L2Slots: o.L2Slots, DevicePages: o.DevicePages}
	c.L2Tokens = int64(o.L2Slots) * int64(o.PageTokens)
	c.L2Bytes, c.L2SlabBytes = c.L2Tokens*c.TokenBytes, c.L2Tokens*c.CopiedTokenBytes
	c.DeviceTokens = int64(o.DevicePages) * int64(o.PageTokens)
	c.DeviceBytes, c.DeviceBufBytes = c.DeviceTokens*c.TokenBytes/int64(cp), c.DeviceTokens*c.CopiedTokenBytes/int64(cp)
	return c
}
