package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/color"
	"math"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/store"
)

// Love plot colours: before weighting in orange, after in sky blue, apart
// from the arms' colours so that a pixel test of the page can tell the
// love plot from the propensity plot.
var (
	colBefore = color.RGBA{R: 230, G: 159, B: 0, A: 255}  // orange
	colAfter  = color.RGBA{R: 86, G: 180, B: 233, A: 255} // sky blue
)

// lovePlot draws the balance of b as a love plot: per covariate, most
// imbalanced at the top, |SMD| before weighting (square) and after
// (dot), joined by a line, with the threshold dashed. A covariate
// that separates the arms (no SMD) is drawn at the right edge and named so.
func lovePlot(b store.Balance) (Figure, error) {
	ranked := b.Report.Ranked()
	n := len(ranked)
	if n == 0 {
		return Figure{}, fmt.Errorf("love plot: no covariates")
	}
	edge := 2 * balance.Threshold
	for _, c := range ranked {
		for _, v := range []float64{c.SMD, c.WSMD} {
			if !math.IsNaN(v) {
				edge = math.Max(edge, math.Abs(v))
			}
		}
	}
	edge *= 1.1
	at := func(v float64) float64 {
		if math.IsNaN(v) {
			return edge
		}
		return math.Abs(v)
	}
	names := make([]string, n)
	before, after := make(plotter.XYs, n), make(plotter.XYs, n)
	p := plot.New()
	for i, c := range ranked {
		y := float64(n - 1 - i) // the most imbalanced at the top
		names[n-1-i] = c.Name
		if math.IsNaN(c.SMD) {
			names[n-1-i] += " (separates the arms)"
		}
		before[i] = plotter.XY{X: at(c.SMD), Y: y}
		after[i] = plotter.XY{X: at(c.WSMD), Y: y}
		l, err := plotter.NewLine(plotter.XYs{before[i], after[i]})
		if err != nil {
			return Figure{}, err
		}
		l.Color, l.Width = colBars, vg.Points(1)
		p.Add(l)
	}
	th, err := vline(balance.Threshold, -0.5, float64(n)-0.5, colBars, true)
	if err != nil {
		return Figure{}, err
	}
	p.Add(th)
	for _, s := range []struct {
		xy     plotter.XYs
		filled bool
	}{{before, false}, {after, true}} {
		sc, err := plotter.NewScatter(s.xy)
		if err != nil {
			return Figure{}, err
		}
		if s.filled {
			sc.GlyphStyle = draw.GlyphStyle{Color: colAfter, Radius: vg.Points(4), Shape: draw.CircleGlyph{}}
		} else {
			sc.GlyphStyle = draw.GlyphStyle{Color: colBefore, Radius: vg.Points(4), Shape: draw.BoxGlyph{}}
		}
		p.Add(sc)
	}
	p.Title.Text = "Covariate balance: |SMD| before weighting (orange squares) and after (blue dots)"
	p.X.Label.Text = fmt.Sprintf("|standardised mean difference|   (dashed: %g)", balance.Threshold)
	p.X.Min, p.X.Max = 0, edge*1.05
	p.Y.Min, p.Y.Max = -0.6, float64(n)-0.4
	p.NominalY(names...)
	height := vg.Length(n)*0.28*vg.Inch + 1.2*vg.Inch
	return renderAt(p, figWidth, max(height, 2.5*vg.Inch), fmt.Sprintf(
		"Love plot of %d covariates: the most imbalanced, %s, has |SMD| %s before weighting and %s after.",
		n, ranked[0].Name, fmtSMD(ranked[0].SMD), fmtSMD(ranked[0].WSMD)))
}

// fmtSMD formats |v|, or says that the covariate separates the arms.
func fmtSMD(v float64) string {
	if math.IsNaN(v) {
		return "undefined (it separates the arms)"
	}
	return fmt.Sprintf("%.2f", math.Abs(v))
}

// renderAt draws p as a PNG of the given size and returns it as a data URI.
func renderAt(p *plot.Plot, w, h vg.Length, alt string) (Figure, error) {
	wt, err := p.WriterTo(w, h, "png")
	if err != nil {
		return Figure{}, fmt.Errorf("render %q: %w", p.Title.Text, err)
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return Figure{}, fmt.Errorf("render %q: %w", p.Title.Text, err)
	}
	return pngFigure(b.Bytes(), alt), nil
}

// balanceSection is one scope of the balance section of the site report.
type balanceSection struct {
	Scope                  string
	Verdict, Class, Advice string
	Reasons                []string
	Treated, Control       int
	ESSTreated, ESSControl string
	Sites, LeftOut         int
	Figure                 *Figure
	Rows                   []balanceRow
}

type balanceRow struct {
	Rank       int
	Name, Type string
	Missing    string
	SMD, WSMD  string
	Imbalanced bool
}

// balanceSections reads the local and global balance of s, with a love
// plot of each; scopes the file lacks are left out.
func balanceSections(ctx context.Context, s *store.Site) ([]balanceSection, error) {
	var out []balanceSection
	for _, scope := range []store.Scope{store.ScopeLocal, store.ScopeGlobal} {
		b, err := s.ReadBalance(ctx, scope)
		if errors.Is(err, store.ErrNoBalance) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r := b.Report
		sec := balanceSection{Scope: "This site's rows", Verdict: string(r.Verdict), Class: "ok", Advice: r.Advice, Reasons: r.Reasons,
			Treated: r.Rows[balance.Treated], Control: r.Rows[balance.Control], Sites: b.Sites, LeftOut: max(b.LeftOut, 0),
			ESSTreated: fmt.Sprintf("%.0f", r.ESS[balance.Treated]), ESSControl: fmt.Sprintf("%.0f", r.ESS[balance.Control])}
		if scope == store.ScopeGlobal {
			sec.Scope = fmt.Sprintf("Every site's rows (run %s)", b.Run)
		}
		switch r.Verdict {
		case balance.Limited:
			sec.Class = "note"
		case balance.Poor:
			sec.Class = "warn"
		}
		for i, c := range r.Ranked() {
			row := balanceRow{Rank: i + 1, Name: c.Name, Type: "continuous", Missing: "–", SMD: signed(c.SMD), WSMD: signed(c.WSMD),
				Imbalanced: balance.IsImbalanced(c.SMD)}
			if c.Binary {
				row.Type = "binary"
			}
			if b.Missing != nil {
				j := slices.IndexFunc(r.Covariates, func(x balance.Covariate) bool { return x.Name == c.Name })
				row.Missing = fmt.Sprint(b.Missing[j])
			}
			sec.Rows = append(sec.Rows, row)
		}
		if len(r.Covariates) > 0 {
			f, err := lovePlot(b)
			if err != nil {
				return nil, err
			}
			sec.Figure = &f
		}
		out = append(out, sec)
	}
	return out, nil
}

// signed formats an SMD with its sign, or says that it is undefined.
func signed(v float64) string {
	if math.IsNaN(v) {
		return "separates the arms"
	}
	return fmt.Sprintf("%+.3f", v)
}
