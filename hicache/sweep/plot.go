package sweep

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/cphicache/cphicache/hicache/outfile"
	"github.com/cphicache/cphicache/hicache/sizing"
	"github.com/cphicache/cphicache/internal/errscope"
)

// The sweep's PNG, drawn as bench/plot.go draws the benchmarks: ours as lines with points, the
// reference (here the ideal hit rate of an unbounded cache) as a thick black dashed line. The code
// map forbids hicache/* to import bench, so the reference's style is drawn here with gonum directly
// (addReference), the same as bench's.

const sweepPlotWidth, sweepPlotHeight = 8 * vg.Inch, 5 * vg.Inch

// WritePlot draws the token hit rate (L1 + L2) against the L2's capacity, one point per run, with
// the ideal rate as a horizontal line. The x axis is logarithmic (sweeps double the size) and each
// point is labelled with its bytes and its tokens.
func (s *Result) WritePlot(path string) error {
	if len(s.Points) == 0 && len(s.PerRank) > 0 { // --l2-design per-rank: its points are the curve
		perRank := *s
		perRank.Points, perRank.PerRank = s.PerRank, nil
		s = &perRank
	}
	if len(s.Points) == 0 {
		return fmt.Errorf("sweep plot %s: no points", path)
	}
	p := plot.New()
	p.Title.Text = s.title()
	perToken := sizing.FormatBytes(s.TokenBytes) + " per token"
	if s.Model != "" {
		perToken += " of " + s.Model
	}
	p.X.Label.Text = "L2 capacity per node (bytes at " + perToken + "; tokens), log scale"
	p.Y.Label.Text = "prompt token hit rate, L1 + L2 (%)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sweepTicks(s.Points)
	p.Y.Min, p.Y.Max = 0, 100
	hits := hitRates(s.Points)
	lines := []any{"L1 + L2 hit rate (one run per size)", hits}
	if len(s.Policies) > 0 { // one curve per policy, the first's being Points
		lines = nil
		for _, c := range s.Policies {
			lines = append(lines, "L1 + L2 hit rate, "+c.Policy, hitRates(c.Points))
		}
	}
	if len(s.PerRank) == len(s.Points) {
		lines = append(lines, "per-rank copies of the same bytes"+s.firstPolicy(), hitRates(s.PerRank))
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	if err := s.addIdeal(p, hits); err != nil {
		return err
	}
	// over the ideal's line, which it meets where the capacity holds every page reused
	bound := func(b BoundPoint) (float64, bool) { return 100 * b.HitRate, true }
	err := s.addBound(p, "OFFLINE bound: Belady's MIN at L1 + L2 pages", boundDashes, bound)
	if err != nil {
		return err
	}
	p.Legend.Top, p.Legend.Left = false, false
	// The legend's line samples are drawn right of its text: moved in by their width, they stay in
	// the image.
	p.Legend.XOffs = -p.Legend.ThumbnailWidth - vg.Points(8)
	// The image goes through outfile, whole or not at all, in the format its extension names (as
	// plot.Save).
	format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), "."))
	image, err := s.render(p, format)
	if err != nil {
		return fmt.Errorf("--plot %s: %w", path, err)
	}
	return outfile.WriteFrom("plot", path, func(w io.Writer) error {
		_, err := image.WriteTo(w)
		return err
	})
}

// render draws the hit rate's plot, and below it, when the points have modelled serving figures,
// their TTFT against the same sizes, in one image.
func (s *Result) render(hits *plot.Plot, format string) (io.WriterTo, error) {
	if s.Points[0].Serving == nil {
		return hits.WriterTo(sweepPlotWidth, sweepPlotHeight, format)
	}
	ttft, err := s.ttftPlot()
	if err != nil {
		return nil, err
	}
	canvas, err := draw.NewFormattedCanvas(sweepPlotWidth, 2*sweepPlotHeight, format)
	if err != nil {
		return nil, err
	}
	tiles := plot.Align(
		[][]*plot.Plot{{hits}, {ttft}},
		draw.Tiles{Rows: 2, Cols: 1, PadY: vg.Points(12)},
		draw.New(canvas),
	)
	hits.Draw(tiles[0][0])
	ttft.Draw(tiles[1][0])
	return canvas, nil
}

// ttftPlot draws the points' modelled TTFT p50 and p99 against the L2's capacity: with the per-rank
// copies' p50 and the modelled L3's; or, when the sweep compared policies, each policy's, the
// per-rank copies' p50 and the OFFLINE bound's, without the modelled L3's.
func (s *Result) ttftPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "MODELLED time to first token: a virtual clock over each point's hits\n" + s.Prefill
	p.X.Label.Text = "L2 capacity per node, log scale"
	p.Y.Label.Text = "TTFT (s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sweepTicks(s.Points)
	p.Y.Min = 0
	draw := s.addTTFTLines
	if len(s.Policies) > 0 {
		draw = s.addPolicyTTFTLines
	}
	if err := draw(p); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	p.Legend.XOffs = -p.Legend.ThumbnailWidth - vg.Points(8)
	return p, nil
}

// addTTFTLines draws the points' TTFT p50 and p99, the per-rank copies' p50 and the modelled L3's
// p50 and p99, as a sweep of one policy does.
func (s *Result) addTTFTLines(p *plot.Plot) error {
	var l3p50, l3p99 plotter.XYs
	for _, pt := range s.Points {
		if l := pt.Serving.WithL3; l != nil {
			x := float64(max(1, pt.L2Bytes))
			l3p50 = append(l3p50, plotter.XY{X: x, Y: l.TTFT.P50})
			l3p99 = append(l3p99, plotter.XY{X: x, Y: l.TTFT.P99})
		}
	}
	lines := []any{"TTFT p50", ttfts(s.Points, 50), "TTFT p99", ttfts(s.Points, 99)}
	if len(s.PerRank) == len(s.Points) {
		lines = append(lines, "p50, per-rank copies of the same bytes", ttfts(s.PerRank, 50))
	}
	if len(l3p50) == len(s.Points) {
		rate := sizing.FormatBytes(int64(s.Points[0].Serving.WithL3.ReadBytesPerSecond))
		lines = append(
			lines,
			"p50, with an L3 at "+rate+"/s",
			l3p50,
			"p99, with an L3 at "+rate+"/s",
			l3p99,
		)
	}
	return plotutil.AddLinePoints(p, lines...)
}

// addPolicyTTFTLines draws each policy's TTFT p50 and p99 in a colour of its own, the per-rank
// copies' p50, and the TTFT at the OFFLINE bound's hits.
func (s *Result) addPolicyTTFTLines(p *plot.Plot) error {
	for k, c := range s.Policies {
		if err := addTTFT(p, k, c.Policy, c.Points, 50, 99); err != nil {
			return err
		}
	}
	if len(s.PerRank) == len(s.Points) {
		err := addTTFT(p, len(s.Policies), "per-rank copies of the same bytes"+s.firstPolicy(),
			s.PerRank, 50)
		if err != nil {
			return err
		}
	}
	at := func(q int) func(BoundPoint) (float64, bool) {
		return func(b BoundPoint) (float64, bool) {
			if b.Serving == nil {
				return 0, false
			}
			return ttfts([]Point{{Serving: b.Serving}}, q)[0].Y, true
		}
	}
	return errors.Join(
		s.addBound(p, "p50 at the OFFLINE bound's hits, loads free", boundDashes, at(50)),
		s.addBound(p, "p99 at the OFFLINE bound's hits, loads free", boundP99Dashes, at(99)),
	)
}

// hitRates are points' L1 + L2 hit rates, in percent, against their L2 bytes.
func hitRates(points []Point) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range points {
		xys = append(xys, plotter.XY{X: float64(max(1, pt.L2Bytes)), Y: 100 * pt.HitRate})
	}
	return xys
}

// ttfts are points' modelled TTFT p50 (q 50) or p99, in seconds, against their L2 bytes.
func ttfts(points []Point, q int) plotter.XYs {
	var xys plotter.XYs
	for _, pt := range points {
		y := pt.Serving.TTFTP50
		if q == 99 {
			y = pt.Serving.TTFTP99
		}
		xys = append(xys, plotter.XY{X: float64(max(1, pt.L2Bytes)), Y: y})
	}
	return xys
}

// addTTFT draws points' TTFT quantiles (50: p50, solid; 99: p99, dashed) in the k-th colour and
// glyph of plotutil's defaults, those the hit rate's k-th curve takes.
func addTTFT(p *plot.Plot, k int, name string, points []Point, quantiles ...int) error {
	for _, q := range quantiles {
		line, glyphs, err := plotter.NewLinePoints(ttfts(points, q))
		if err != nil {
			return err
		}
		line.Color, glyphs.Color, glyphs.Shape = plotutil.Color(k), plotutil.Color(k), plotutil.Shape(k)
		if q == 99 {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		}
		p.Add(line, glyphs)
		p.Legend.Add(fmt.Sprintf("p%d, %s", q, name), line, glyphs)
	}
	return nil
}

// firstPolicy names, when the sweep compared policies, the one the per-rank copies ran.
func (s *Result) firstPolicy() string {
	if len(s.Policies) == 0 {
		return ""
	}
	return ", " + s.Policies[0].Policy
}

// addBound draws the OFFLINE bound at each size (y's value of it; nothing when a size's bound
// has none, or there is no bound) as a grey line with crosses, dashed as dashes: apart from the
// policies' lines and the ideal's black dashes.
func (s *Result) addBound(
	p *plot.Plot,
	name string,
	dashes []vg.Length,
	y func(BoundPoint) (float64, bool),
) error {
	if len(s.OfflineBound) == 0 {
		return nil
	}
	var xys plotter.XYs
	for _, b := range s.OfflineBound {
		v, ok := y(b)
		if !ok {
			return nil
		}
		xys = append(xys, plotter.XY{X: float64(max(1, b.L2Bytes)), Y: v})
	}
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return err
	}
	grey := color.Gray{Y: 0x60}
	line.Color, line.Width, line.Dashes = grey, vg.Points(2), dashes
	points.Color, points.Shape = grey, draw.CrossGlyph{}
	p.Add(line, points)
	p.Legend.Add(name, line, points)
	return nil
}

// The OFFLINE bound's dashes: its hit rate and TTFT p50 dotted, its TTFT p99 dot-dashed.
var (
	boundDashes    = []vg.Length{vg.Points(2), vg.Points(2)}
	boundP99Dashes = []vg.Length{vg.Points(6), vg.Points(2), vg.Points(1), vg.Points(2)}
)

// plotFormats are the image formats gonum/plot writes, by file extension.
var plotFormats = []string{"eps", "jpg", "jpeg", "pdf", "png", "svg", "tex", "tif", "tiff"}

// CheckPlotFormat fails, before the sweep runs, on a --plot whose extension names no format
// WritePlot can write.
func CheckPlotFormat(path string) error {
	if path == "" {
		return nil
	}
	if format := strings.ToLower(strings.TrimPrefix(filepath.Ext(path), ".")); !slices.Contains(
		plotFormats,
		format,
	) {
		return &errscope.ConfigError{
			Flag: "plot",
			Reason: fmt.Sprintf(
				"%s: the extension %q names no image format; use one of .%s",
				path,
				format,
				strings.Join(plotFormats, ", ."),
			),
		}
	}
	return nil
}

func (s *Result) title() string {
	workload := "synthetic workload"
	if s.Trace != "" {
		workload = filepath.Base(s.Trace)
	}
	model := "--token-bytes geometry"
	if s.Model != "" {
		model = s.Model
	}
	return fmt.Sprintf(
		"cphicache sweep: hit rate vs L2 capacity\n%s, %s, %s, L1 %d tokens over a CP group of %d",
		model,
		workload,
		s.WritePolicy,
		s.DeviceTokens,
		s.GroupGPUs,
	)
}

// addIdeal draws the ideal rate across the swept range. It is the same at every point (the same
// events), so the first point's stands for all.
func (s *Result) addIdeal(p *plot.Plot, hits plotter.XYs) error {
	lo, hi := hits[0].X, hits[0].X
	for _, h := range hits {
		lo, hi = min(lo, h.X), max(hi, h.X)
	}
	if hi == lo { // one point: a line needs a width
		lo, hi = lo/2, hi*2
	}
	ideal := 100 * s.Points[0].IdealRate
	return addReference(
		p,
		fmt.Sprintf("ideal: an unbounded cache (%.1f%%)", ideal),
		plotter.XYs{{X: lo, Y: ideal}, {X: hi, Y: ideal}},
	)
}

// addReference draws a reference as a thick black dashed line, so it stands apart from the measured
// line; it is bench's style for its references (bench/plot.go), which this package may not import.
func addReference(p *plot.Plot, name string, xys plotter.XYs) error {
	line, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	line.Color = color.Black
	line.Width = vg.Points(2.5)
	line.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
	p.Add(line)
	p.Legend.Add(name, line)
	return nil
}

// sweepTicks labels each swept size with its bytes and tokens.
type sweepTicks []Point

func (t sweepTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, pt := range t {
		if x := float64(max(1, pt.L2Bytes)); x >= lo && x <= hi {
			ticks = append(
				ticks,
				plot.Tick{
					Value: x,
					Label: sizing.FormatBytes(
						pt.L2Bytes,
					) + "\n" + formatTokens(
						pt.L2Tokens,
					) + " tok",
				},
			)
		}
	}
	return ticks
}

// formatTokens writes a token count as 3.36M, 210k or 512.
func formatTokens(n int64) string {
	switch {
	case n >= 1e6:
		return fmt.Sprintf("%.3gM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.3gk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}
