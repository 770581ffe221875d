package report

import (
	"math"
	"strings"
	"testing"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/store"
)

// imbalancedBalance is a balance of four covariates, severity the most
// imbalanced and mended by weighting.
func imbalancedBalance() store.Balance {
	c := func(name string, smd, wsmd float64) balance.Covariate {
		return balance.Covariate{Name: name, SMD: smd, WSMD: wsmd, SD: 1}
	}
	return store.Balance{Scope: store.ScopeLocal, Report: balance.Report{Covariates: []balance.Covariate{
		c("age", 0.05, 0.02), c("severity", 1.1, 0.03), c("sex", -0.08, 0.01), c("bmi", 0.2, -0.04),
	}}}
}

// TestLovePlotShowsImprovement is the pixel check of the love plot: both
// series are drawn, and in the top row (severity, the most imbalanced)
// the marker before weighting lies far to the right of the one after.
func TestLovePlotShowsImprovement(t *testing.T) {
	f, err := lovePlot(imbalancedBalance())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Alt, "severity, has |SMD| 1.10 before weighting and 0.03 after") {
		t.Errorf("alt text %q", f.Alt)
	}
	img := decodeFigure(t, f)
	h := img.Bounds().Dy()
	checkColours(t, "love plot", img, []colourCheck{
		{name: "before weighting", col: colBefore, in: whole, min: 100},
		{name: "after weighting", col: colAfter, in: whole, min: 100},
	})
	if t.Failed() {
		t.FailNow()
	}
	// The top data row lies in the upper part of the image, below the title.
	top := h / 5
	_, xb := pixels(img, colBefore, top/2, top+top/2)
	_, xa := pixels(img, colAfter, top/2, top+top/2)
	if !(xb > xa+float64(img.Bounds().Dx())/3) {
		t.Errorf("top row: before weighting at x = %.0f, after at %.0f; want before far to the right", xb, xa)
	}
}

func TestLovePlotSeparatingCovariate(t *testing.T) {
	b := imbalancedBalance()
	b.Report.Covariates[0].SMD = math.NaN()
	f, err := lovePlot(b)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Alt, "age, has |SMD| undefined (it separates the arms)") {
		t.Errorf("alt text %q", f.Alt)
	}
	if _, err := lovePlot(store.Balance{}); err == nil {
		t.Error("a love plot of no covariates")
	}
}
