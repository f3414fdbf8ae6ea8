package sweep

import "testing"

// point is a shared pool's point of L2 bytes a node with a modelled TTFT p50 and p99.
func point(bytes int64, p50, p99 float64) Point {
	return Point{L2Bytes: bytes, L2BytesPerNode: bytes, L2Tokens: bytes / 100, Design: DesignShared,
		HitRate: float64(bytes) / 1e4, Serving: &ServingPoint{TTFTP50: p50, TTFTP99: p99}}
}

// TestTheAnswerIsTheSmallestL2WithinTheMargin: the L2 to buy is the smallest size whose TTFT p50 is
// within the margin of the best on the curve, not the best itself; with a margin of 0 it is the
// best; the answer sets it beside no L2 and beside the per-rank copies of the same size.
func TestTheAnswerIsTheSmallestL2WithinTheMargin(t *testing.T) {
	res := &Result{
		Points: []Point{point(100, 9, 20), point(200, 1.04, 3), point(400, 1.0, 2.5),
			point(800, 1.01, 2.4)},
		NoL2: &Point{Design: DesignNoL2, Serving: &ServingPoint{TTFTP50: 12, TTFTP99: 30}},
	}
	for _, p := range res.Points {
		perRank := p
		perRank.Design, perRank.Serving = DesignPerRank, &ServingPoint{TTFTP50: 2 * p.Serving.TTFTP50}
		res.PerRank = append(res.PerRank, perRank)
	}
	a := res.answer(5)
	if a == nil || a.L2.L2Bytes != 200 || a.L2.BestPoint != 2 || a.L2.BestTTFTP50 != 1.0 ||
		a.L2.TTFTP50 != 1.04 || a.L2.HitRate != 0.02 {
		t.Fatalf("within 5%%: %+v, want 200 bytes (1.04 s, within 5%% of 1.0 s at 400)", a.L2)
	}
	if a.NoL2 == nil || a.NoL2.TTFTP50 != 12 || a.PerRank == nil || a.PerRank.L2Bytes != 200 ||
		a.PerRank.Design != DesignPerRank {
		t.Errorf("beside no L2 %+v and per-rank copies %+v: want the baseline and the same size's",
			a.NoL2, a.PerRank)
	}
	if exact := res.answer(0); exact.L2.L2Bytes != 400 {
		t.Errorf("within 0%%: %d bytes, want the best, 400", exact.L2.L2Bytes)
	}
	if none := (&Result{Points: []Point{{L2Bytes: 1}}}).answer(5); none != nil {
		t.Errorf("without the serving clock: %+v, want no answer", none)
	}
}
