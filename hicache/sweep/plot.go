package sweep

import (
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
	var hits plotter.XYs
	for _, pt := range s.Points {
		hits = append(hits, plotter.XY{X: float64(max(1, pt.L2Bytes)), Y: 100 * pt.HitRate})
	}
	lines := []any{"L1 + L2 hit rate (one run per size)", hits}
	if len(s.PerRank) == len(s.Points) {
		var perRank plotter.XYs
		for _, pt := range s.PerRank {
			perRank = append(perRank, plotter.XY{X: float64(max(1, pt.L2Bytes)), Y: 100 * pt.HitRate})
		}
		lines = append(lines, "per-rank copies of the same bytes", perRank)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return err
	}
	if err := s.addIdeal(p, hits); err != nil {
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

// ttftPlot draws the points' modelled TTFT p50 and p99 against the L2's capacity.
func (s *Result) ttftPlot() (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = "MODELLED time to first token: a virtual clock over each point's hits\n" + s.Prefill
	p.X.Label.Text = "L2 capacity per node, log scale"
	p.Y.Label.Text = "TTFT (s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = sweepTicks(s.Points)
	p.Y.Min = 0
	var p50, p99, l3p50, l3p99 plotter.XYs
	for _, pt := range s.Points {
		x := float64(max(1, pt.L2Bytes))
		p50 = append(p50, plotter.XY{X: x, Y: pt.Serving.TTFTP50})
		p99 = append(p99, plotter.XY{X: x, Y: pt.Serving.TTFTP99})
		if l := pt.Serving.WithL3; l != nil {
			l3p50 = append(l3p50, plotter.XY{X: x, Y: l.TTFT.P50})
			l3p99 = append(l3p99, plotter.XY{X: x, Y: l.TTFT.P99})
		}
	}
	lines := []any{"TTFT p50", p50, "TTFT p99", p99}
	if len(s.PerRank) == len(s.Points) {
		var perRank plotter.XYs
		for _, pt := range s.PerRank {
			perRank = append(perRank, plotter.XY{X: float64(max(1, pt.L2Bytes)), Y: pt.Serving.TTFTP50})
		}
		lines = append(lines, "p50, per-rank copies of the same bytes", perRank)
	}
	if len(l3p50) == len(p50) {
		rate := sizing.FormatBytes(int64(s.Points[0].Serving.WithL3.ReadBytesPerSecond))
		lines = append(
			lines,
			"p50, with an L3 at "+rate+"/s",
			l3p50,
			"p99, with an L3 at "+rate+"/s",
			l3p99,
		)
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	p.Legend.XOffs = -p.Legend.ThumbnailWidth - vg.Points(8)
	return p, nil
}

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
