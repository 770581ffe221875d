package report

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"

	"github.com/crffd/crffd/store"
)

func TestCountTicks(t *testing.T) {
	for _, tc := range []struct {
		lo, hi float64
		want   string
	}{
		{0, 3.3, "0 1 2 3 "}, {0, 500, "0 100 200 300 400 500 "}, {0, 0.9, "0 "}, {0, 27, "0 10 20 "}, {0, 12, "0 5 10 "},
	} {
		got := ""
		for _, tk := range (countTicks{}).Ticks(tc.lo, tc.hi) {
			if _, err := strconv.Atoi(tk.Label); err != nil {
				t.Errorf("[%v, %v]: label %q is not a whole number", tc.lo, tc.hi, tk.Label)
			}
			got += tk.Label + " "
		}
		if got != tc.want {
			t.Errorf("[%v, %v]: ticks %q, want %q", tc.lo, tc.hi, got, tc.want)
		}
	}
}

// minorityArm returns the propensities of 975 treated rows and 25
// controls, a seeded draw in which the controls overlap the treated.
func minorityArm() (treated, control []float64) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 975 {
		treated = append(treated, 0.6+0.35*r.Float64())
	}
	for range 25 {
		control = append(control, 0.3+0.5*r.Float64())
	}
	return treated, control
}

// overlapChecks are the pixel checks of a propensity figure: the treated
// rows' bars in the upper panel only, the control rows' in the lower
// panel only, and tall there (reaching its upper half), as they are on a
// scale of their own; on the treated rows' scale 25 controls would be
// bars a few pixels high at the bottom of the figure.
var overlapChecks = []colourCheck{
	{name: "treated rows", col: colTreated, in: upperHalf, min: 500, out: []region{lowerHalf}},
	{name: "control rows", col: colControl, in: lowerHalf, min: 500, out: []region{upperHalf}},
	{name: "control rows' tallest bar", col: colControl, in: region{0, 0.5, 1, 0.75}, min: 50},
}

// TestOverlapShowsTheMinorityArm is the pixel check of the propensity
// plot: with 975 treated rows and 25 controls, the control rows' bars are
// drawn, in their own panel below the treated rows', on their own scale.
func TestOverlapShowsTheMinorityArm(t *testing.T) {
	treated, control := minorityArm()
	f, err := overlapHist(treated, control, 0.01, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	checkColours(t, "propensity figure", decodeFigure(t, f), overlapChecks)
	panels, err := overlapPanels(treated, control, 0.01, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if len(panels) != 2 {
		t.Fatalf("%d panels, want one per arm", len(panels))
	}
	for i, want := range []string{"treated rows (n = 975)", "control rows (n = 25)"} {
		if !strings.Contains(panels[i].Title.Text, want) {
			t.Errorf("panel %d is titled %q, want its arm and count %q", i, panels[i].Title.Text, want)
		}
		if panels[i].X.Min >= 0 || panels[i].X.Max <= 1 {
			t.Errorf("panel %d: x range [%g, %g] puts a bar or bound at 0 or 1 on the border", i, panels[i].X.Min, panels[i].X.Max)
		}
	}
}

// TestSiteReportShowsTheMinorityArm is the same pixel check through a
// site file and report.Site: a site of 975 treated rows and 25 controls,
// its report's propensity figure decoded from the page.
func TestSiteReportShowsTheMinorityArm(t *testing.T) {
	ctx := context.Background()
	s, err := store.Open(ctx, filepath.Join(t.TempDir(), "site.sqlite"), store.Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	treated, control := minorityArm()
	writePropensitySite(t, s, append(slices.Clone(treated), control...), len(treated))
	var b bytes.Buffer
	if err := Site(ctx, s, &b); err != nil {
		t.Fatal(err)
	}
	img := figureIn(t, b.String(), "Histograms of the propensity of 975 treated rows (upper panel) and 25 control rows (lower panel)")
	checkColours(t, "site report's propensity figure", img, overlapChecks)
}

// TestCountAxesHaveWholeTicks checks every count axis of the report's
// histograms: its ticks are whole numbers whatever the counts, where
// gonum's default ticks label 0 to 550 rows "0.00 250.00 500.00" and 0 to
// 1.1 rows "0.0 0.5 1.0".
func TestCountAxesHaveWholeTicks(t *testing.T) {
	treated, control := minorityArm()
	panels, err := overlapPanels(treated, control[:1], 0.01, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	if len(panels) != 2 {
		t.Fatalf("%d panels, want one per arm", len(panels))
	}
	cate, _, _, err := cateHistPlot([]float64{1, 2, 2, 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	axes := map[string]*plot.Plot{"treated propensity": panels[0], "control propensity (1 row)": panels[1], "CATE histogram": cate}
	for name, p := range axes {
		for _, r := range [][2]float64{{p.Y.Min, p.Y.Max}, {0, 550}, {0, 1.1}} {
			labels := 0
			for _, tk := range p.Y.Tick.Marker.Ticks(r[0], r[1]) {
				if tk.Label == "" {
					continue
				}
				labels++
				if _, err := strconv.Atoi(tk.Label); err != nil {
					t.Errorf("%s: count axis over [%g, %g] labelled %q, want whole numbers", name, r[0], r[1], tk.Label)
				}
			}
			if labels < 2 {
				t.Errorf("%s: count axis over [%g, %g] has %d labels", name, r[0], r[1], labels)
			}
		}
	}
}

// TestCATEHistKeepsLinesAndLegendClear: an ATE at the edge of the data
// is drawn inside the plot, not on its border, and the legend sits in a
// band of its own above the bars.
func TestCATEHistKeepsLinesAndLegendClear(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	cates := make([]float64, 1000)
	for i := range cates {
		cates[i] = 1 + r.NormFloat64()
	}
	f, err := cateHist(cates, []ateLine{{name: "global AIPW", ate: 6, lower: 5.8, upper: 6.2, color: colGlobal}})
	if err != nil {
		t.Fatal(err)
	}
	img := decodeFigure(t, f)
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	// Below the legend band, the global ATE's lines are drawn, and none of
	// them at the right border.
	checkColours(t, "CATE histogram", img, []colourCheck{
		{name: "global ATE lines", col: colGlobal, in: region{0, 1.0 / 3, 0.975, 1}, min: 100, out: []region{{0.975, 1.0 / 3, 1, 1}}},
	})
	// Every bar lies below every legend entry: the legend's lowest pixel
	// of its colours (grey swatch, green lines) at the left is above the
	// highest grey pixel right of the legend.
	legendBottom := -1
	for _, c := range []color.RGBA{colBars, colGlobal} {
		if _, y1 := rowsOf(img, c, 0, w/4, 0, h/3); y1 > legendBottom {
			legendBottom = y1
		}
	}
	barsTop, _ := rowsOf(img, colBars, w/4, w, 0, h)
	if legendBottom < 0 || barsTop <= legendBottom {
		t.Errorf("legend down to row %d, bars from row %d: they overlap", legendBottom, barsTop)
	}
}

// writePropensitySite writes to s a table "visits" of len(ps) rows, the
// first treated of them treated, and a run whose row i+1 has the
// propensity ps[i]: only what the overlap section reads.
func writePropensitySite(t testing.TB, s *store.Site, ps []float64, treated int) {
	t.Helper()
	ctx := context.Background()
	rows := make([][]any, len(ps))
	for i := range rows {
		w := int64(0)
		if i < treated {
			w = 1
		}
		rows[i] = []any{int64(i + 1), float64(i % 7), w, float64(i % 3)}
	}
	cols := []store.Column{{Name: "id", Type: store.Integer}, {Name: "x", Type: store.Real},
		{Name: "w", Type: store.Integer}, {Name: "y", Type: store.Real}}
	if err := s.CreateTable(ctx, "visits", cols, rows, false); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ReadRecords(ctx, store.Source{DB: s.Path(), Table: "visits", IDColumn: "id", TreatmentColumn: "w", OutcomeColumn: "y"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.BeginRun(ctx, "run-1", recs.Layout); err != nil {
		t.Fatal(err)
	}
	var res store.Results
	for i, id := range recs.IDs { // in ascending id order, as rows
		res.CATE = append(res.CATE, store.CATE{RowID: id, CATE: 1, Lower: 0.8, Upper: 1.2, Y0: 0, Y1: 1, Propensity: ps[i]})
	}
	if err := s.WriteResults(ctx, "run-1", res); err != nil {
		t.Fatal(err)
	}
}

// TestHeatmapRowZeroOnTop checks that row i, column j of the figure is
// λ_ij as a matrix is read: in [[0, 1], [1, 1]] the one cell of λ = 0,
// drawn in the palette's red, is the top-left one.
func TestHeatmapRowZeroOnTop(t *testing.T) {
	f, err := heatmap("λ", "borrows from", "site", []string{"a", "b"}, []string{"a", "b"}, [][]float64{{0, 1}, {1, 1}})
	if err != nil {
		t.Fatal(err)
	}
	img := decodeFigure(t, f)
	red := color.RGBA{R: 255, A: 255} // palette.Heat's colour of 0
	b := img.Bounds()
	midX, midY := (b.Min.X+b.Max.X)/2, (b.Min.Y+b.Max.Y)/2
	top, _ := countColour(img, red, image.Rect(b.Min.X, b.Min.Y, b.Max.X, midY))
	bottom, _ := countColour(img, red, image.Rect(b.Min.X, midY, b.Max.X, b.Max.Y))
	n, meanX := countColour(img, red, b)
	if n == 0 || top <= 10*bottom || meanX >= float64(midX) {
		t.Errorf("λ = 0 drawn in %d pixels (%d in the top half, %d in the bottom), mean x %.0f of %d: want the top-left cell", n, top, bottom, meanX, b.Dx())
	}
}
