package report

import (
	"strings"
	"testing"
)

// TestCapacityLineInTheModelsBytes: without a model the capacity line is the geometry's, as it
// always was; with one (--model, or --prefill-model over a scaled-down geometry) each tier is also
// said per node, L1 per CP group, the L3 in tokens, and a scaled-down run says what it replays.
func TestCapacityLineInTheModelsBytes(t *testing.T) {
	line := func(c Capacity) string {
		var b strings.Builder
		(&Report{Capacity: c}).writeCapacity(&b)
		return b.String()
	}
	plain := Capacity{TokenBytes: 2048, CopiedTokenBytes: 2048, L2Slots: 2048, L2Tokens: 32768,
		L2Bytes: 64 << 20, L2BytesPerNode: 64 << 20, DevicePages: 512, DeviceTokens: 8192,
		DeviceBytes: 2 << 20, DeviceBytesPerGroup: 16 << 20, DeviceBytesPerNode: 16 << 20}
	if got, want := line(plain), "  capacity: L2 2048 slots = 32768 tokens = 64 MiB per CP group; "+
		"L1 512 pages = 8192 tokens = 2 MiB per rank; KV 2 KiB per token\n"; got != want {
		t.Errorf("without a model:\n%q\nwant\n%q", got, want)
	}
	model := Capacity{Model: "deepseek-v3", TokenBytes: 70272, CopiedTokenBytes: 64, Scaled: true,
		L2Slots: 32768, L2Tokens: 2097152, L2Bytes: 2097152 * 70272, L2BytesPerNode: 2097152 * 70272,
		L2SlabBytes: 128 << 20, DevicePages: 4096, DeviceTokens: 262144,
		DeviceBytes: 262144 * 70272 / 8, DeviceBytesPerGroup: 262144 * 70272,
		DeviceBytesPerNode: 262144 * 70272, DeviceBufBytes: 2 << 20,
		L3Tokens: 15646464, L3Bytes: 1 << 40, L3BytesPerNode: 1 << 40, L3StoreBytes: 14 << 30}
	got := line(model)
	for _, want := range []string{
		"L2 32768 slots = 2097152 tokens = 137.2 GiB per CP group, 137.2 GiB per node",
		"L1 4096 pages = 262144 tokens = 2.145 GiB per rank (a GPU), 17.16 GiB per CP group, 17.16 GiB per node",
		"L3 15646464 tokens = 1 TiB per CP group, 1 TiB per node",
		"KV 68.62 KiB per token of deepseek-v3",
		"copies SCALED DOWN: 64 B copied per token instead of 68.62 KiB",
		"replayed: L1 2 MiB per rank, the L3's budget 14 GiB per CP group",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the capacity lines lack %q:\n%s", want, got)
		}
	}
}

// TestEveryZeroCarriesItsUnit: a TTFT's part that took no time reads "0 s", not a bare 0; the
// parts printed are their means, which add up to the mean TTFT printed before them.
func TestEveryZeroCarriesItsUnit(t *testing.T) {
	var b strings.Builder
	(&ServingReport{
		TimeScale: 1,
		Requests:  1,
		TTFT:      Percentiles{P50: 0.5, Mean: 0.7127},
		QueueWait: Percentiles{Mean: 0.6},
		Compute:   Percentiles{Mean: 0.1127},
	}).writeSummary(&b)
	for _, want := range []string{
		"L3 prefetch wait 0 s",
		"load wait 0 s",
		"queue 600.0 ms",
		"mean TTFT 712.7 ms = queue 600.0 ms + L3 prefetch wait 0 s + load wait 0 s + compute 112.7 ms (the means of a TTFT's parts, which add up; of the compute, the steps' real work beyond the model 0 s)",
		"p50 500.0 ms, p90 0 s",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the serving summary lacks %q:\n%s", want, b.String())
		}
	}
}
