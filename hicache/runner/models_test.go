package runner

import (
	"errors"
	"strings"
	"testing"

	"github.com/cphicache/cphicache/hicache/config"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// TestModelTableFigures: the published figures. Llama-3.1-70B in bf16 is 80 layers x K and V x 8 KV
// heads x head_dim 128 x 2 B = 320 KiB per token, so 1 TiB of host memory holds about 3.3M tokens;
// DeepSeek-V3's MLA latent is 61 layers x (512 + 64) x 2 B.
func TestModelTableFigures(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tokenBytes int64
	}{
		{"llama-3.1-8b", 128 << 10}, {"llama-3.1-70b", 320 << 10}, {"qwen2.5-72b", 320 << 10}, {"deepseek-v3", 61 * 576 * 2},
	} {
		m, err := sizing.LookupModel(tc.name)
		if err != nil || m.TokenBytes() != tc.tokenBytes {
			t.Errorf(
				"%s: %d bytes per token (%v), want %d",
				tc.name,
				m.TokenBytes(),
				err,
				tc.tokenBytes,
			)
		}
	}
	opts := &config.Options{
		Model:       "Llama-3.1-70B",
		PageTokens:  16,
		L2Bytes:     1 << 40,
		DevicePages: 1,
	}
	for _, cp := range []int{1, 8} {
		sized, err := opts.Size(cp, 8, 1)
		if err != nil {
			t.Fatal(err)
		}
		// One CP group per node of 8 ranks at cp 8; 8 groups of one rank at cp 1, each with an
		// eighth of the node.
		c := sized.Capacity(cp, 8)
		perNode := c.L2Tokens * int64(8/cp)
		if perNode < 3_300_000 || perNode > 3_360_000 || c.TokenBytes != 320<<10 ||
			c.L2Bytes > (1<<40)/int64(8/cp) || c.L2BytesPerNode != c.L2Bytes*int64(8/cp) ||
			c.L2BytesPerNode > 1<<40 {
			t.Errorf(
				"cp %d: 1 TiB per node holds %d tokens of %d bytes (%d bytes per group), want about 3.3M of 320 KiB",
				cp,
				perNode,
				c.TokenBytes,
				c.L2Bytes,
			)
		}
	}
}

// TestModelRankTokenBytes: a rank's part of a token is the model's per-layer-payload bytes divided
// by cp and rounded up to 8, so the group's slot is a page of the model's tokens whatever the CP
// size.
func TestModelRankTokenBytes(t *testing.T) {
	llama, _ := sizing.LookupModel("llama-3.1-70b")
	deepseek, _ := sizing.LookupModel("deepseek-v3")
	for _, tc := range []struct {
		m        sizing.Model
		cp, want int
	}{{llama, 1, 2048}, {llama, 8, 256}, {llama, 16, 128}, {deepseek, 1, 1152}, {deepseek, 8, 144},
		{deepseek, 5, 232}} {
		if got := tc.m.RankTokenBytes(tc.cp); got != tc.want {
			t.Errorf("%s at cp %d: %d bytes, want %d", tc.m.Name, tc.cp, got, tc.want)
		}
	}
	if _, err := sizing.LookupModel("gpt-5"); err == nil ||
		!strings.Contains(err.Error(), "llama-3.1-70b") {
		t.Errorf("an unknown model: %v, want an error listing the table", err)
	}
}

// TestScaledCopiesKeepTheCapacityInTokens: --copy-token-bytes changes the bytes copied, never the
// slots.
func TestScaledCopiesKeepTheCapacityInTokens(t *testing.T) {
	full := &config.Options{
		Model:       "llama-3.1-70b",
		PageTokens:  16,
		L2Bytes:     64 << 30,
		DeviceBytes: 1 << 30,
	}
	scaled := *full
	scaled.CopyTokenBytes = 8
	a, errA := full.Size(8, 8, 1)
	b, errB := scaled.Size(8, 8, 1)
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	ca, cb := a.Capacity(8, 8), b.Capacity(8, 8)
	if ca.L2Slots != cb.L2Slots || ca.DevicePages != cb.DevicePages || ca.L2Bytes != cb.L2Bytes ||
		ca.Scaled ||
		!cb.Scaled ||
		b.TokenBytes != 8 ||
		cb.L2SlabBytes*32 != ca.L2SlabBytes {
		t.Errorf("real %+v\nscaled %+v", ca, cb)
	}
	scaled.CopyTokenBytes = 512 // more than a rank's 256 bytes at cp 8
	if _, err := scaled.Size(8, 8, 1); !isFlagError(err, "copy-token-bytes") {
		t.Errorf("copying more than the model: %v, want an invalid --copy-token-bytes", err)
	}
	tiny := &config.Options{Model: "llama-3.1-70b", PageTokens: 16, L2Bytes: 1 << 20}
	if _, err := tiny.Size(1, 1, 1); !isFlagError(err, "l2-bytes") {
		t.Errorf("1 MiB for 5 MiB slots: %v, want an invalid --l2-bytes", err)
	}
}

// TestParseByteSizeNamesTheFlag: sizes in binary and decimal units, and errors that name the flag.
func TestParseByteSizeNamesTheFlag(t *testing.T) {
	for in, want := range map[string]int64{"512GiB": 512 << 30, "1.5TiB": 3 << 39, "64GB": 64e9, "4096": 4096, " 2 MiB ": 2 << 20, "10kB": 10000} {
		if got, err := sizing.ParseByteSize("l2-bytes", in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "12XB", "-1GiB", "0", "GiB", "1e30TiB", "NaN"} {
		if _, err := sizing.ParseByteSize("device-bytes", in); !isFlagError(err, "device-bytes") {
			t.Errorf("%q: %v, want an invalid --device-bytes", in, err)
		}
	}
	if sizes, err := sizing.ParseByteSizes("l2-bytes", "64GiB,128GiB"); err != nil ||
		len(sizes) != 2 ||
		sizes[1] != 128<<30 {
		t.Errorf("a list: %v %v", sizes, err)
	}
	if _, err := sizing.ParseByteSizes("l2-bytes", "64GiB,,128GiB"); !isFlagError(err, "l2-bytes") {
		t.Errorf("an empty item: %v, want an invalid --l2-bytes", err)
	}
}

func isFlagError(err error, flag string) bool {
	var ce *errscope.ConfigError
	return errors.As(err, &ce) && ce.Flag == flag
}

// TestL2BytesArePerNodeForAGroupOverNodes: --l2-bytes is each node's, so a CP16 group over two
// nodes of 8 has twice the slots of the same bytes on one node, its geometry says so, and each
// node's slab is the bytes given.
func TestL2BytesArePerNodeForAGroupOverNodes(t *testing.T) {
	opts := &config.Options{
		Layers:           2,
		PayloadsPerLayer: 2,
		PageTokens:       16,
		TokenBytes:       64,
		L2Bytes:          64 << 20,
		DevicePages:      1,
		SlabBytesMax:     1 << 30,
	}
	one, err := opts.Size(16, 16, 1)
	if err != nil {
		t.Fatal(err)
	}
	two, err := opts.Size(16, 8, 2)
	if err != nil {
		t.Fatal(err)
	}
	g1, g2 := one.Geometry(16), two.Geometry(16)
	if two.L2Slots != 2*one.L2Slots || g1.Nodes != 0 || g2.Nodes != 2 ||
		g2.TotalBytes() != opts.L2Bytes ||
		g1.TotalBytes() != opts.L2Bytes {
		t.Errorf(
			"64 MiB a node: %d slots on one node (%d bytes, nodes %d), %d over two (%d bytes a node, nodes %d); want twice the slots and 64 MiB a node",
			one.L2Slots,
			g1.TotalBytes(),
			g1.Nodes,
			two.L2Slots,
			g2.TotalBytes(),
			g2.Nodes,
		)
	}
}
