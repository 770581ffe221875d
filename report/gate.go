package report

import (
	"context"
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/crffd/crffd/store"
)

// gateRow is a subgroup's row in the report: its figures, or the reason
// it has none.
type gateRow struct {
	Scope, Subgroup string
	N               string
	Estimate        string
	Interval        string
	PlugIn          string
	Reason          string
}

// gateSection reads crff_gate into rows and, when any subgroup has
// figures, a forest plot of them.
func gateSection(ctx context.Context, s *store.Site) ([]gateRow, *Figure, error) {
	gs, err := s.ReadGATE(ctx)
	if err != nil {
		return nil, nil, err
	}
	var rows []gateRow
	var shown []store.GATE
	for _, g := range gs {
		r := gateRow{Scope: string(g.Scope), Subgroup: g.Subgroup, N: "-", Estimate: "-", Interval: "-", PlugIn: "-", Reason: g.Reason}
		if g.Reason == "" {
			e := g.Estimate
			r.N = fmt.Sprintf("%d (%d treated)", g.N, g.Treated)
			r.Estimate = fmt.Sprintf("%.4g ± %.3g", e.Estimate, e.SE)
			r.Interval = fmt.Sprintf("[%.4g, %.4g]", e.Lower, e.Upper)
			r.PlugIn = fmt.Sprintf("%.4g", g.PlugIn)
			shown = append(shown, g)
		}
		rows = append(rows, r)
	}
	if len(shown) == 0 {
		return rows, nil, nil
	}
	f, err := forestPlot(shown, "Subgroup effects: AIPW estimate (dot) and 95% interval (bar)", func(g store.GATE) string {
		return fmt.Sprintf("%s (%s, n = %d)", g.Subgroup, g.Scope, g.N)
	})
	if err != nil {
		return nil, nil, err
	}
	return rows, &f, nil
}

// forestPlot draws each group's effect with its 95% interval, one row
// each in the order given and named by name, with a dashed line at no
// effect.
func forestPlot(gs []store.GATE, title string, name func(store.GATE) string) (Figure, error) {
	n := len(gs)
	p := plot.New()
	names := make([]string, n)
	points := make(plotter.XYs, n)
	lo, hi := 0.0, 0.0
	for i, g := range gs {
		y := float64(n - 1 - i) // the first at the top
		names[n-1-i] = name(g)
		e := g.Estimate
		points[i] = plotter.XY{X: e.Estimate, Y: y}
		l, err := plotter.NewLine(plotter.XYs{{X: e.Lower, Y: y}, {X: e.Upper, Y: y}})
		if err != nil {
			return Figure{}, err
		}
		l.Color, l.Width = colBars, vg.Points(1.5)
		p.Add(l)
		lo, hi = math.Min(lo, e.Lower), math.Max(hi, e.Upper)
	}
	zero, err := vline(0, -0.5, float64(n)-0.5, colBars, true)
	if err != nil {
		return Figure{}, err
	}
	p.Add(zero)
	sc, err := plotter.NewScatter(points)
	if err != nil {
		return Figure{}, err
	}
	sc.GlyphStyle = draw.GlyphStyle{Color: colAfter, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}
	p.Add(sc)
	pad := 0.05 * (hi - lo)
	p.Title.Text = title
	p.X.Label.Text = "group average treatment effect   (dashed: no effect)"
	p.X.Min, p.X.Max = lo-pad, hi+pad
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	p.NominalY(names...)
	height := vg.Length(n)*0.3*vg.Inch + 1.2*vg.Inch
	first := gs[0]
	return renderAt(p, figWidth, max(height, 2*vg.Inch), fmt.Sprintf(
		"Forest plot of %d group effects; the first, %s, is %.3g with 95%% interval [%.3g, %.3g].",
		n, first.Subgroup, first.Estimate.Estimate, first.Estimate.Lower, first.Estimate.Upper))
}
