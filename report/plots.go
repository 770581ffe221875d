package report

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/crffd/crffd/store"
)

// A figure is built in two steps, so that a new one (such as the love
// plot of balance.go) takes a builder and a line to render it: a builder
// returns its *plot.Plot, or panels of them, with data, axes and labels,
// count axes set with countAxis; then render or renderAt (one plot),
// stack (panels sharing an x axis) or withLegend (a plot with its legend
// in a band above, never over the data) turns it into an embedded PNG.
// Tests check the builders' plots (their axes, their ticks) and the
// rendered PNGs' pixels (pixels_test.go).

// Figure sizes: wide enough to read on a laptop screen, small enough that
// the page stays light.
const (
	figWidth  = 7 * vg.Inch
	figHeight = 3.5 * vg.Inch
)

// Colours of the figures, chosen to stay apart for colour-blind readers.
var (
	colTreated = color.RGBA{R: 213, G: 94, B: 0, A: 255}    // vermilion
	colControl = color.RGBA{R: 0, G: 114, B: 178, A: 255}   // blue
	colLocal   = color.RGBA{R: 0, G: 0, B: 0, A: 255}       // black
	colGlobal  = color.RGBA{R: 0, G: 158, B: 115, A: 255}   // green
	colWarn    = color.RGBA{R: 204, G: 0, B: 0, A: 255}     // red
	colBars    = color.RGBA{R: 120, G: 120, B: 120, A: 255} // grey
	// The loss plot's series avoid the arms' and the love plot's colours,
	// so that a pixel test of the page can tell those figures apart.
	colSeries = []color.Color{
		color.RGBA{R: 204, G: 121, B: 167, A: 255}, // reddish purple
		color.RGBA{R: 0, G: 158, B: 115, A: 255},   // bluish green
		color.RGBA{R: 0, G: 0, B: 0, A: 255},       // black
		color.RGBA{R: 240, G: 228, B: 66, A: 255},  // yellow
	}
)

// Figure is a rendered plot: the src attribute of an img element holding
// the PNG as a data URI, and the image's text alternative.
type Figure struct {
	Src template.HTMLAttr
	Alt string
}

// render draws p as a PNG of the standard size and returns it as a data
// URI.
func render(p *plot.Plot, alt string) (Figure, error) {
	return renderAt(p, figWidth, figHeight, alt)
}

// pngFigure returns the figure of the PNG image b.
func pngFigure(b []byte, alt string) Figure {
	// The attribute is built here from base64 text alone (no quote, no
	// angle bracket), so it is safe to mark as an attribute for
	// html/template, which would otherwise escape every '+'.
	src := `src="data:image/png;base64,` + base64.StdEncoding.EncodeToString(b) + `"`
	return Figure{Src: template.HTMLAttr(src), Alt: alt}
}

// vline returns a vertical line at x from y0 to y1.
func vline(x, y0, y1 float64, c color.Color, dashed bool) (*plotter.Line, error) {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: y0}, {X: x, Y: y1}})
	if err != nil {
		return nil, err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	return l, nil
}

// lossPlot draws the loss of each model per round, one panel per model
// (their losses differ by orders of magnitude), stacked in one image with
// their round axes aligned.
func lossPlot(ls []store.Loss) (Figure, error) {
	byModel := map[string]plotter.XYs{}
	for _, l := range ls {
		byModel[l.Model] = append(byModel[l.Model], plotter.XY{X: float64(l.Round), Y: l.Loss})
	}
	models := make([]string, 0, len(byModel))
	for m := range byModel {
		models = append(models, m)
	}
	slices.Sort(models)
	panels := make([]*plot.Plot, len(models))
	for i, m := range models {
		xys := byModel[m]
		slices.SortFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		p := plot.New()
		p.Title.Text = "Training loss per round: " + m + " model"
		p.Y.Label.Text = "loss J"
		if i == len(models)-1 {
			p.X.Label.Text = "round"
		}
		p.Add(plotter.NewGrid())
		l, err := plotter.NewLine(xys)
		if err != nil {
			return Figure{}, fmt.Errorf("loss of %q: %w", m, err)
		}
		l.Color = colSeries[i%len(colSeries)]
		l.Width = vg.Points(1.5)
		p.Add(l)
		panels[i] = p
	}
	return stack(panels, 2*vg.Inch, fmt.Sprintf("Training loss per round of %d models", len(models)))
}

// stack draws the panels top to bottom in one PNG of the standard width,
// each panel h high, with their axes aligned so that one x value sits at
// one column in every panel, and returns it as a figure.
func stack(panels []*plot.Plot, h vg.Length, alt string) (Figure, error) {
	if len(panels) == 0 {
		return Figure{}, fmt.Errorf("render %q: no panels", alt)
	}
	img := vgimg.New(figWidth, vg.Length(len(panels))*h)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(panels), Cols: 1, PadY: vg.Points(8), PadTop: vg.Points(2), PadBottom: vg.Points(2)}
	rows := make([][]*plot.Plot, len(panels))
	for i, p := range panels {
		rows[i] = []*plot.Plot{p}
	}
	cs := plot.Align(rows, tiles, dc)
	for i, p := range panels {
		p.Draw(cs[i][0])
	}
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&b); err != nil {
		return Figure{}, fmt.Errorf("render %q: %w", alt, err)
	}
	return pngFigure(b.Bytes(), alt), nil
}

// grid is a matrix of transfer factors for plotter.HeatMap: row r, column
// c. NaN marks an unknown factor.
type grid [][]float64

func (g grid) Dims() (c, r int)   { return len(g[0]), len(g) }
func (g grid) Z(c, r int) float64 { return g[r][c] }
func (g grid) X(c int) float64    { return float64(c) }
func (g grid) Y(r int) float64    { return float64(r) }

// heatmap draws the transfer factors z (rows by columns) on a fixed [0, 1]
// scale, with each factor printed in its cell and the first row at the
// top, as a matrix is read: row i, column j is λ_ij.
func heatmap(title, xLabel, yLabel string, rows, cols []string, z [][]float64) (Figure, error) {
	alt := fmt.Sprintf("%s: %d by %d transfer factors", title, len(rows), len(cols))
	n := len(z)
	if n == 0 || len(z[0]) == 0 || len(rows) != n || len(cols) != len(z[0]) {
		return Figure{}, fmt.Errorf("render %q: %d row names and %d column names for a %d-row matrix", title, len(rows), len(cols), n)
	}
	pal := palette.Heat(32, 1)
	h := plotter.NewHeatMap(grid(z), pal)
	h.Min, h.Max = 0, 1
	h.NaN = color.RGBA{R: 230, G: 230, B: 230, A: 255}
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = yLabel
	p.Add(h)
	var xys plotter.XYs
	var labels []string
	for r := range z {
		for c, v := range z[r] {
			if math.IsNaN(v) {
				continue
			}
			xys = append(xys, plotter.XY{X: float64(c), Y: float64(r)})
			labels = append(labels, fmt.Sprintf("%.3f", v))
		}
	}
	if len(xys) > 0 {
		l, err := plotter.NewLabels(plotter.XYLabels{XYs: xys, Labels: labels})
		if err != nil {
			return Figure{}, fmt.Errorf("heatmap labels: %w", err)
		}
		for i := range l.TextStyle {
			l.TextStyle[i].XAlign = draw.XCenter
			l.TextStyle[i].YAlign = draw.YCenter
		}
		p.Add(l)
	}
	p.NominalX(cols...)
	p.NominalY(rows...)
	p.X.Min, p.X.Max = -0.5, float64(len(cols))-0.5
	p.Y.Min, p.Y.Max = -0.5, float64(len(rows))-0.5
	// Row 0 at the top, as a matrix is read (HeatMap draws it at the
	// bottom on a plain scale).
	p.Y.Scale = plot.InvertedScale{Normalizer: plot.LinearScale{}}
	return render(p, alt)
}

// bins counts vs in n equal bins over [lo, hi], the last bin closed.
func bins(vs []float64, n int, lo, hi float64) []plotter.HistogramBin {
	if hi <= lo {
		lo, hi = lo-0.5, lo+0.5
	}
	w := (hi - lo) / float64(n)
	bs := make([]plotter.HistogramBin, n)
	for i := range bs {
		bs[i] = plotter.HistogramBin{Min: lo + float64(i)*w, Max: lo + float64(i+1)*w}
	}
	for _, v := range vs {
		i := int((v - lo) / w)
		if i >= n {
			i = n - 1
		}
		if i >= 0 {
			bs[i].Weight++
		}
	}
	return bs
}

// maxWeight returns the largest bin count.
func maxWeight(bs []plotter.HistogramBin) float64 {
	m := 0.0
	for _, b := range bs {
		m = max(m, b.Weight)
	}
	return m
}

// hist returns a histogram plotter of bins bs.
func hist(bs []plotter.HistogramBin, fill color.Color) *plotter.Histogram {
	return &plotter.Histogram{
		Bins:      bs,
		Width:     bs[0].Max - bs[0].Min,
		FillColor: fill,
		LineStyle: draw.LineStyle{Color: color.White, Width: vg.Points(0.5)},
	}
}

// ateLine is an ATE to mark on the CATE histogram.
type ateLine struct {
	name string
	ate  float64
	// lower and upper bound the 95% interval; NaN when there is none.
	lower, upper float64
	color        color.Color
}

// countTicks labels a count axis with whole numbers only: 0, 5, 10 and
// not 0.00, 2.50, 5.00.
type countTicks struct{}

// Ticks implements plot.Ticker.
func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	lo = math.Max(0, math.Ceil(lo))
	if hi < lo {
		return nil
	}
	// The step: 1, 2 or 5 times a power of ten, for about five labels.
	raw := math.Max(1, (hi-lo)/5)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{2, 5, 10} {
		if step >= raw {
			break
		}
		step = m * mag
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return ts
}

// countAxis makes a the axis of a count, labelled label: whole-number
// ticks from zero up. Every histogram's count axis goes through here, so
// that none falls back to gonum's default ticks, which label counts
// "0.00, 250.00, 500.00".
func countAxis(a *plot.Axis, label string) {
	a.Label.Text = label
	a.Tick.Marker = countTicks{}
}

// withLegend draws p with legend l in a band above it, so that no legend
// entry covers the data, and returns the PNG as a figure of the standard
// width. rows is the number of entries of l.
func withLegend(p *plot.Plot, l plot.Legend, rows int, alt string) (Figure, error) {
	band := vg.Length(rows)*l.TextStyle.Height("M") + vg.Points(6)
	img := vgimg.New(figWidth, figHeight+band)
	dc := draw.New(img)
	top := draw.Crop(dc, 0, 0, figHeight, 0)
	l.Top, l.Left = true, true
	l.XOffs, l.YOffs = vg.Points(60), -vg.Points(4)
	l.Draw(top)
	p.Draw(draw.Crop(dc, 0, 0, 0, -band))
	var b bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&b); err != nil {
		return Figure{}, fmt.Errorf("render %q: %w", p.Title.Text, err)
	}
	return pngFigure(b.Bytes(), alt), nil
}

// cateHist draws the histogram of the CATEs with each ATE as a solid line
// and its 95% interval, where it has one, as dashed lines, with the legend
// in a band above the plot.
func cateHist(cates []float64, ates []ateLine) (Figure, error) {
	p, legend, rows, err := cateHistPlot(cates, ates)
	if err != nil {
		return Figure{}, err
	}
	return withLegend(p, legend, rows, fmt.Sprintf("Histogram of %d CATEs with %d ATEs marked", len(cates), len(ates)))
}

// cateHistPlot builds the plot of cateHist and its legend of rows
// entries. The x range is padded beyond the bars and the lines, so that no
// line falls on the border where the axis would hide it.
func cateHistPlot(cates []float64, ates []ateLine) (p *plot.Plot, legend plot.Legend, rows int, err error) {
	if len(cates) == 0 {
		return nil, legend, 0, fmt.Errorf("histogram of the CATEs: no CATE")
	}
	lo, hi := slices.Min(cates), slices.Max(cates)
	for _, a := range ates {
		lo, hi = min(lo, a.ate), max(hi, a.ate)
		if !math.IsNaN(a.lower) {
			lo, hi = min(lo, a.lower), max(hi, a.upper)
		}
	}
	bs := bins(cates, 30, lo, hi)
	pad := (bs[len(bs)-1].Max - bs[0].Min) * 0.05
	top := maxWeight(bs) * 1.05
	p = plot.New()
	p.Title.Text = "Distribution of the CATEs"
	p.X.Min, p.X.Max = bs[0].Min-pad, bs[len(bs)-1].Max+pad
	p.Y.Min, p.Y.Max = 0, top*1.02
	p.X.Label.Text = "CATE"
	countAxis(&p.Y, "rows")
	legend = plot.NewLegend()
	add := func(label string, t plot.Thumbnailer) {
		legend.Add(label, t)
		rows++
	}
	h := hist(bs, colBars)
	p.Add(h)
	add(fmt.Sprintf("CATE (%d rows)", len(cates)), h)
	for _, a := range ates {
		l, err := vline(a.ate, 0, top, a.color, false)
		if err != nil {
			return nil, legend, 0, err
		}
		p.Add(l)
		add(fmt.Sprintf("%s ATE %.3f", a.name, a.ate), l)
		if math.IsNaN(a.lower) {
			continue
		}
		for i, x := range []float64{a.lower, a.upper} {
			l, err := vline(x, 0, top, a.color, true)
			if err != nil {
				return nil, legend, 0, err
			}
			p.Add(l)
			if i == 0 {
				add(fmt.Sprintf("%s 95%% interval", a.name), l)
			}
		}
	}
	return p, legend, rows, nil
}

// overlapHist draws the propensities of the treated rows (upper panel) and
// of the control rows (lower panel), so that a small arm stays visible
// beside a large one: 25 control rows drawn on the scale of 975 treated
// would be bars one pixel high.
func overlapHist(treated, control []float64, low, high float64) (Figure, error) {
	panels, err := overlapPanels(treated, control, low, high)
	if err != nil {
		return Figure{}, err
	}
	return stack(panels, figHeight*3/4, fmt.Sprintf("Histograms of the propensity of %d treated rows (upper panel) and %d control rows (lower panel)", len(treated), len(control)))
}

// overlapPanels builds the panels of overlapHist: one per arm, treated
// first, each titled with its arm's row count and with its own count
// scale, on one [0, 1] propensity axis padded so that the positivity
// bounds, dashed red lines in both, stay off the border.
func overlapPanels(treated, control []float64, low, high float64) ([]*plot.Plot, error) {
	const n = 40
	arms := []struct {
		name string
		ps   []float64
		col  color.RGBA
	}{{"treated", treated, colTreated}, {"control", control, colControl}}
	panels := make([]*plot.Plot, len(arms))
	for i, a := range arms {
		bs := bins(a.ps, n, 0, 1)
		// At least 1 so that an empty arm still has a count axis, whose
		// empty panel then shows the arm is missing.
		top := max(maxWeight(bs), 1) * 1.1
		p := plot.New()
		p.Title.Text = fmt.Sprintf("Propensity of the %s rows (n = %d)", a.name, len(a.ps))
		if i == 0 {
			p.Title.Text += fmt.Sprintf("; dashed red: positivity bounds [%g, %g]", low, high)
		}
		p.X.Min, p.X.Max = -0.02, 1.02
		p.Y.Min, p.Y.Max = 0, top
		countAxis(&p.Y, "rows")
		if i == len(arms)-1 {
			p.X.Label.Text = "propensity p(w=1|x)"
		}
		p.Add(hist(bs, a.col))
		for _, x := range []float64{low, high} {
			l, err := vline(x, 0, top, colWarn, true)
			if err != nil {
				return nil, err
			}
			p.Add(l)
		}
		panels[i] = p
	}
	return panels, nil
}
