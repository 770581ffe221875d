package report

import (
	"bytes"
	"encoding/base64"
	"image"
	"image/color"
	"image/png"
	"math"
	"strings"
	"testing"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/store"
)

// decodeFigure decodes the PNG of a rendered figure.
func decodeFigure(t *testing.T, f Figure) image.Image {
	t.Helper()
	src := strings.TrimSuffix(strings.TrimPrefix(string(f.Src), `src="data:image/png;base64,`), `"`)
	b, err := base64.StdEncoding.DecodeString(src)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// near reports whether c is within tol of want in every channel.
func near(c color.Color, want color.RGBA, tol int) bool {
	r, g, b, _ := c.RGBA()
	d := func(x uint32, y uint8) bool { return int(math.Abs(float64(int(x>>8)-int(y)))) <= tol }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

// pixels returns the count and mean x of the pixels of colour want in the
// rows [y0, y1) of img.
func pixels(img image.Image, want color.RGBA, y0, y1 int) (n int, meanX float64) {
	bd := img.Bounds()
	sum := 0
	for y := max(y0, bd.Min.Y); y < min(y1, bd.Max.Y); y++ {
		for x := bd.Min.X; x < bd.Max.X; x++ {
			if near(img.At(x, y), want, 30) {
				n++
				sum += x
			}
		}
	}
	if n == 0 {
		return 0, math.NaN()
	}
	return n, float64(sum) / float64(n)
}

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
	nb, _ := pixels(img, colBefore, 0, h)
	na, _ := pixels(img, colAfter, 0, h)
	if nb < 100 || na < 100 {
		t.Fatalf("%d pixels before weighting and %d after: a series is missing", nb, na)
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
