package kernels

import (
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// naiveCoalesce is the deliberately simple model: drop empty spans, then merge the first adjacent
// pair found until none is left.
func naiveCoalesce(in []Span) []Span {
	var out []Span
	for _, s := range in {
		if s.Bytes != 0 {
			out = append(out, s)
		}
	}
	for merged := true; merged; {
		merged = false
		for i := 0; i+1 < len(out); i++ {
			a, b := out[i], out[i+1]
			if a.Slab == b.Slab && a.DeviceOffsetBytes+a.Bytes == b.DeviceOffsetBytes &&
				a.SlabOffsetBytes+a.Bytes == b.SlabOffsetBytes {
				out[i].Bytes += b.Bytes
				out = slices.Delete(out, i+1, i+2)
				merged = true
				break
			}
		}
	}
	return out
}

// byteMap lists, for every byte the spans copy, its (device, slab, slab offset) in order: the
// meaning of a span list, which coalescing must keep.
func byteMap(spans []Span) [][3]int64 {
	var m [][3]int64
	for _, s := range spans {
		for k := range s.Bytes {
			m = append(m, [3]int64{s.DeviceOffsetBytes + k, int64(s.Slab), s.SlabOffsetBytes + k})
		}
	}
	return m
}

func checkCoalesce(t *testing.T, in []Span) {
	t.Helper()
	want := naiveCoalesce(in)
	meaning := byteMap(in)
	got := Coalesce(slices.Clone(in))
	if !slices.Equal(got, want) {
		t.Fatalf("Coalesce(%v)\n got %v\nwant %v", in, got, want)
	}
	if !slices.Equal(byteMap(got), meaning) {
		t.Fatalf("Coalesce(%v) changed which bytes are copied where: %v", in, got)
	}
	for i := 1; i < len(got); i++ {
		if got[i-1].continues(got[i]) {
			t.Fatalf("Coalesce left mergeable neighbours %d and %d: %v", i-1, i, got)
		}
	}
}

// randomRunSpans builds short spans that are often, but not always, adjacent to their predecessor.
func randomRunSpans(rng *rand.Rand, n int) []Span {
	spans := make([]Span, 0, n)
	var dev, slabOff int64
	var slab int32
	for range n {
		switch rng.IntN(6) {
		case 0:
			dev += int64(rng.IntN(3))
		case 1:
			slabOff += int64(rng.IntN(3))
		case 2:
			slab = int32(rng.IntN(2))
		}
		s := Span{
			DeviceOffsetBytes: dev,
			Slab:              slab,
			SlabOffsetBytes:   slabOff,
			Bytes:             int64(rng.IntN(4)),
		}
		spans = append(spans, s)
		dev, slabOff = s.deviceEnd(), s.slabEnd()
	}
	return spans
}

func TestCoalesceMatchesNaiveModelFixedSeed(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		checkCoalesce(t, randomRunSpans(rng, rng.IntN(20)))
	}
}

func TestCoalesceMergesLayerFirstRunsButNotPageFirst(t *testing.T) {
	for _, pageFirst := range []bool{false, true} {
		g := testGeometry{
			ranks:        2,
			layers:       3,
			payloads:     2,
			devicePages:  16,
			slotsPerSlab: 8,
			slabs:        2,
			partBytes:    64,
			pageFirst:    pageFirst,
		}
		// 10 pages from slot 3 of slab 0: slots 3..7 of slab 0, then 0..4 of slab 1.
		spans := g.spansFor(1, g.objectPlacements(2, 10, 0, 3))
		got := Coalesce(slices.Clone(spans))
		want := len(spans) // page_first: no two parts of one rank are adjacent in a slab
		if !pageFirst {
			want = g.layers * g.payloads * 2 // one run per (layer, payload) and slab
		}
		if len(got) != want {
			t.Errorf("%v: %d spans coalesced to %d, want %d", g, len(spans), len(got), want)
		}
		checkCoalesce(t, spans)
	}
}

func TestCoalesceEdgeCases(t *testing.T) {
	cases := map[string][]Span{
		"nil":               nil,
		"all empty":         {{Bytes: 0}, {DeviceOffsetBytes: 5}},
		"empty between":     {{0, 0, 0, 4}, {4, 0, 4, 0}, {4, 0, 4, 4}},
		"other slab":        {{0, 0, 0, 4}, {4, 1, 4, 4}},
		"device gap":        {{0, 0, 0, 4}, {5, 0, 4, 4}},
		"backwards":         {{4, 0, 4, 4}, {0, 0, 0, 4}},
		"three in a row":    {{0, 0, 8, 4}, {4, 0, 12, 4}, {8, 0, 16, 4}},
		"single":            {{7, 3, 9, 1}},
		"slab side only":    {{0, 0, 0, 4}, {8, 0, 4, 4}},
		"device side only":  {{0, 0, 0, 4}, {4, 0, 8, 4}},
		"run then new slab": {{0, 0, 0, 4}, {4, 0, 4, 4}, {8, 1, 8, 4}, {12, 1, 12, 4}},
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) { checkCoalesce(t, in) })
	}
	if got := Coalesce([]Span{{0, 0, 0, 4}, {4, 0, 4, 4}}); len(got) != 1 || got[0].Bytes != 8 {
		t.Fatalf("two adjacent spans: got %v, want one span of 8 bytes", got)
	}
}

// FuzzCoalesce decodes spans from the fuzz input (small fields, so that adjacency is common) and
// compares Coalesce with the naive model.
func FuzzCoalesce(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 4, 0, 4, 4})
	f.Add([]byte{1, 2, 3, 4, 5, 1, 7, 0, 9, 9, 9, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		var spans []Span
		for len(data) >= 4 && len(spans) < 64 {
			spans = append(spans, Span{
				DeviceOffsetBytes: int64(data[0] % 16), Slab: int32(data[1] % 2),
				SlabOffsetBytes: int64(data[2] % 16), Bytes: int64(data[3] % 5),
			})
			data = data[4:]
		}
		checkCoalesce(t, spans)
	})
}

func TestValidateSpansNamesTheBadSpan(t *testing.T) {
	slabBytes := []int64{100, 50}
	const deviceBytes = 200
	good := Span{DeviceOffsetBytes: 10, Slab: 1, SlabOffsetBytes: 10, Bytes: 10}
	bad := map[string]Span{
		"negative length": {Bytes: -1},
		"device buffer":   {DeviceOffsetBytes: 195, Bytes: 10},
		"device buffer ":  {DeviceOffsetBytes: -1, Bytes: 1},
		"no such slab":    {Slab: 2, Bytes: 1},
		"no such slab ":   {Slab: -1, Bytes: 1},
		"out of slab 1":   {Slab: 1, SlabOffsetBytes: 45, Bytes: 6},
		"out of slab 0":   {SlabOffsetBytes: -4, Bytes: 1},
		"out of the device": {
			DeviceOffsetBytes: 1 << 62,
			Bytes:             1 << 62,
		}, // the sum overflows int64
		"out of slab 0 [0, ": {SlabOffsetBytes: 1 << 62, Bytes: 1},
		"device buffer [0, ": {DeviceOffsetBytes: 201}, // zero length, but past the end
	}
	for reason, s := range bad {
		_, err := validateSpans([]Span{good, good, s}, deviceBytes, slabBytes)
		var spanErr *SpanError
		if !errors.As(err, &spanErr) || spanErr.Index != 2 ||
			!strings.Contains(err.Error(), strings.TrimSpace(reason)) {
			t.Errorf(
				"span %+v: got error %v, want a SpanError for span 2 mentioning %q",
				s,
				err,
				reason,
			)
		}
	}
	total, err := validateSpans(
		[]Span{good, {DeviceOffsetBytes: deviceBytes, SlabOffsetBytes: 50, Slab: 1}},
		deviceBytes,
		slabBytes,
	)
	if err != nil || total != 10 {
		t.Fatalf(
			"valid spans (one empty at the very end): total %d, error %v; want 10, nil",
			total,
			err,
		)
	}
}
