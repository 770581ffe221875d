package report

import (
	"context"
	"fmt"
	"math"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/crffd/crffd/store"
)

// heteroSection is the report's "Is the heterogeneity real" section:
// the statistics of crff_heterogeneity, the GATES as a forest plot, the
// TOC curve, the CLAN table and the policies.
type heteroSection struct {
	Stats  []heteroRow
	GATES  *Figure
	TOC    *Figure
	CLAN   []heteroRow
	Policy []heteroRow
}

// heteroRow is one row of the section's tables: a name and its figures.
type heteroRow struct {
	Name, Estimate, Interval, Extra string
}

func interval(lo, hi float64) string { return fmt.Sprintf("[%.4g, %.4g]", lo, hi) }

// heterogeneitySection reads crff_heterogeneity, crff_clan and
// crff_policy; nil when the run wrote none.
func heterogeneitySection(ctx context.Context, s *store.Site) (*heteroSection, error) {
	h, err := s.ReadHeterogeneity(ctx)
	if err != nil {
		return nil, err
	}
	if len(h.Stats) == 0 {
		return nil, nil
	}
	out := &heteroSection{}
	var gates []store.GATE
	var toc plotter.XYs
	var tocLo, tocHi []float64
	for _, st := range h.Stats {
		e := st.Estimate
		switch {
		case strings.HasPrefix(st.Statistic, "gates_") && st.Statistic != "gates_top_minus_bottom":
			gates = append(gates, store.GATE{Scope: st.Scope, Subgroup: st.Statistic, N: e.N, Estimate: e})
			continue
		case strings.HasPrefix(st.Statistic, "toc_"):
			var q float64
			if _, err := fmt.Sscanf(st.Statistic, "toc_%g", &q); err == nil {
				toc = append(toc, plotter.XY{X: q / 100, Y: e.Estimate})
				tocLo, tocHi = append(tocLo, e.Lower), append(tocHi, e.Upper)
			}
			continue
		}
		extra := ""
		if st.PValue >= 0 {
			extra = fmt.Sprintf("p = %.3g", st.PValue)
		}
		out.Stats = append(out.Stats, heteroRow{Name: scoped(st.Statistic, st.Scope), Estimate: fmt.Sprintf("%.4g ± %.3g", e.Estimate, e.SE), Interval: interval(e.Lower, e.Upper), Extra: extra})
	}
	if len(gates) > 0 {
		f, err := forestPlot(gates, "GATES: the AIPW effect in each fifth of the CATE (1: lowest)", func(g store.GATE) string {
			return fmt.Sprintf("%s (n = %d)", g.Subgroup, g.N)
		})
		if err != nil {
			return nil, err
		}
		out.GATES = &f
	}
	if len(toc) > 1 {
		f, err := tocPlot(toc, tocLo, tocHi)
		if err != nil {
			return nil, err
		}
		out.TOC = &f
	}
	for _, c := range h.CLAN {
		out.CLAN = append(out.CLAN, heteroRow{Name: c.Covariate, Estimate: fmt.Sprintf("%.4g − %.4g = %.4g", c.Top.Estimate, c.Bottom.Estimate, c.Spread.Estimate),
			Interval: interval(c.Spread.Lower, c.Spread.Upper)})
	}
	for _, p := range h.Policy {
		out.Policy = append(out.Policy, heteroRow{Name: scoped(p.Policy, p.Scope), Estimate: fmt.Sprintf("%.4g ± %.3g", p.Value.Estimate, p.Value.SE),
			Interval: interval(p.Value.Lower, p.Value.Upper),
			Extra: fmt.Sprintf("treats %.0f%%; gain over none %.4g %s, over all %.4g %s", 100*p.Treats, p.GainNone.Estimate,
				interval(p.GainNone.Lower, p.GainNone.Upper), p.GainAll.Estimate, interval(p.GainAll.Lower, p.GainAll.Upper))})
	}
	return out, nil
}

// scoped names a statistic of scope: its name, and for the federation's
// pooled figures, "(all sites)" after it.
func scoped(name string, scope store.Scope) string {
	if scope == store.ScopeGlobal {
		return name + " (all sites)"
	}
	return name
}

// tocPlot draws the TOC curve with its pointwise 95% intervals.
func tocPlot(toc plotter.XYs, lo, hi []float64) (Figure, error) {
	p := plot.New()
	l, err := plotter.NewLine(toc)
	if err != nil {
		return Figure{}, err
	}
	l.Color, l.Width = colAfter, vg.Points(1.5)
	p.Add(l)
	low, high := 0.0, 0.0
	for i, pt := range toc {
		bar, err := plotter.NewLine(plotter.XYs{{X: pt.X, Y: lo[i]}, {X: pt.X, Y: hi[i]}})
		if err != nil {
			return Figure{}, err
		}
		bar.Color = colBars
		p.Add(bar)
		low, high = math.Min(low, lo[i]), math.Max(high, hi[i])
	}
	zero, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 0}, {X: 1, Y: 0}})
	if err != nil {
		return Figure{}, err
	}
	zero.Color, zero.Dashes = colBars, []vg.Length{vg.Points(3), vg.Points(3)}
	p.Add(zero)
	p.Title.Text = "TOC: the effect among the top q of the CATE minus the average effect"
	p.X.Label.Text = "q, the share of rows treated, largest CATE first"
	p.Y.Label.Text = "TOC(q) (bars: 95% intervals)"
	p.X.Min, p.X.Max = 0, 1.02
	p.Y.Min, p.Y.Max = low-0.05*(high-low+1e-9), high+0.05*(high-low+1e-9)
	return render(p, fmt.Sprintf("TOC curve at %d shares; at q = %.1f it is %.3g.", len(toc), toc[0].X, toc[0].Y))
}
