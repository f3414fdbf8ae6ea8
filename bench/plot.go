package bench

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// plotSize is the PNG's size: readable in a pull request or a terminal image viewer.
const plotWidth, plotHeight = 8 * vg.Inch, 5 * vg.Inch

// PlotCopy draws bandwidth against part size: one line per (layout, direction) of ours and the
// memcpy line (the mean of the memcpy measurements taken beside them at that part size).
func PlotCopy(rows []CopyRow, path, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "part size (bytes, log2)"
	p.Y.Label.Text = "bandwidth (GB/s)"
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = powerOfTwoTicks{}
	series := map[string]plotter.XYs{}
	var names []string
	memcpy := map[int64][]float64{}
	for _, r := range rows {
		name := fmt.Sprintf("ours %s %s", r.Layout, r.Direction)
		if _, ok := series[name]; !ok {
			names = append(names, name)
		}
		series[name] = append(series[name], plotter.XY{X: float64(r.PartBytes), Y: r.OursGBps})
		memcpy[r.PartBytes] = append(memcpy[r.PartBytes], r.MemcpyGBps)
	}
	var ref plotter.XYs
	for part, v := range memcpy {
		ref = append(ref, plotter.XY{X: float64(part), Y: mean(v)})
	}
	sort.Slice(ref, func(i, j int) bool { return ref[i].X < ref[j].X })
	if err := addLines(p, names, series); err != nil {
		return err
	}
	if err := addReference(p, "memcpy (same bytes, same run)", ref); err != nil {
		return err
	}
	// Bandwidth lines are high and flat: the legend goes to the empty bottom left.
	p.Y.Min = 0
	p.Legend.Left = true
	return p.Save(plotWidth, plotHeight, path)
}

// PlotAllreduce draws latency against message size for ours, the cgo floor and the C reference.
func PlotAllreduce(rows []AllreduceRow, path, title string) error {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "message size (bytes, log2)"
	p.Y.Label.Text = "avg latency (us, log)"
	p.X.Scale, p.Y.Scale = plot.LogScale{}, plot.LogScale{}
	p.X.Tick.Marker = powerOfTwoTicks{}
	p.Y.Tick.Marker = oneTwoFiveTicks{}
	const oursName, floorName = "ours: (*mpi.Comm).AllreduceUint64 MIN", "cgo floor: MPI_Allreduce through one bare cgo call"
	var ours, floor, ref plotter.XYs
	for _, r := range rows {
		ours = append(ours, plotter.XY{X: float64(r.Bytes), Y: r.OurUs})
		floor = append(floor, plotter.XY{X: float64(r.Bytes), Y: r.FloorUs})
		ref = append(ref, plotter.XY{X: float64(r.Bytes), Y: r.RefUs})
	}
	if err := addLines(
		p, []string{oursName, floorName}, map[string]plotter.XYs{oursName: ours, floorName: floor},
	); err != nil {
		return err
	}
	if err := addReference(p, "C: MPI_Allreduce loop (same job)", ref); err != nil {
		return err
	}
	// Latency grows with size: the top left is empty.
	p.Legend.Top, p.Legend.Left = true, true
	return p.Save(plotWidth, plotHeight, path)
}

func addLines(p *plot.Plot, names []string, series map[string]plotter.XYs) error {
	var args []any
	for _, n := range names {
		args = append(args, n, series[n])
	}
	return plotutil.AddLinePoints(p, args...)
}

// addReference draws a reference as a thick black dashed line, so it stands apart from the measured
// lines. hicache/sweep draws its ideal rate in the same style with a copy of its own, since
// hicache/* may not import bench (DESIGN.md, "Code map").
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

// powerOfTwoTicks labels the powers of two in range with B, KiB or MiB.
type powerOfTwoTicks struct{}

func (powerOfTwoTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for v := 1.0; v <= hi; v *= 2 {
		if v >= lo {
			ticks = append(ticks, plot.Tick{Value: v, Label: bytesLabel(v)})
		}
	}
	return ticks
}

// oneTwoFiveTicks labels 1, 2 and 5 times the powers of ten in range, and the ends of the range
// when fewer than two of those fall inside it (a narrow latency range would otherwise have no
// labels).
type oneTwoFiveTicks struct{}

func (oneTwoFiveTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for decade := math.Pow(10, math.Floor(math.Log10(lo))); decade <= hi; decade *= 10 {
		for _, m := range []float64{1, 2, 5} {
			if v := m * decade; v >= lo && v <= hi {
				ticks = append(
					ticks,
					plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'g', 3, 64)},
				)
			}
		}
	}
	if len(ticks) < 2 {
		ticks = append(ticks, plot.Tick{Value: lo, Label: strconv.FormatFloat(lo, 'g', 3, 64)},
			plot.Tick{Value: hi, Label: strconv.FormatFloat(hi, 'g', 3, 64)})
	}
	return ticks
}

func bytesLabel(v float64) string {
	switch {
	case v >= 1<<20:
		return fmt.Sprintf("%gMiB", v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%gKiB", v/(1<<10))
	}
	return fmt.Sprintf("%gB", v)
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
