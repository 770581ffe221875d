package report

import (
	"image"
	"image/color"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
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

// TestOverlapShowsTheMinorityArm is the pixel check of the propensity
// plot: with 975 treated rows and 25 controls, the control rows' bars are
// drawn, in their own panel below the treated rows'.
func TestOverlapShowsTheMinorityArm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var treated, control []float64
	for range 975 {
		treated = append(treated, 0.6+0.35*r.Float64())
	}
	for range 25 {
		control = append(control, 0.3+0.5*r.Float64())
	}
	f, err := overlapHist(treated, control, 0.01, 0.99)
	if err != nil {
		t.Fatal(err)
	}
	img := decodeFigure(t, f)
	h := img.Bounds().Dy()
	for _, c := range []struct {
		name   string
		n      int
		y0, y1 int
	}{
		{"treated, upper panel", first(pixels(img, colTreated, 0, h/2)), 0, h / 2},
		{"control, lower panel", first(pixels(img, colControl, h/2, h)), h / 2, h},
	} {
		if c.n < 500 {
			t.Errorf("%s: %d pixels of its colour, want its bars drawn", c.name, c.n)
		}
	}
	if n, _ := pixels(img, colControl, 0, h/2); n > 0 {
		t.Errorf("%d control pixels in the treated panel", n)
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
	_, x := pixels(img, colGlobal, h/3, h)
	if n, _ := pixelsIn(img, colGlobal, w-w/40, w, h/3, h); n > 0 || !(x < float64(w-w/40)) {
		t.Errorf("the global ATE's lines reach the right border (mean x %.0f of %d)", x, w)
	}
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

// first returns the first of two values.
func first(n int, _ float64) int { return n }

// pixelsIn counts the pixels of colour want in columns [x0, x1) and rows
// [y0, y1) of img, with their mean x.
func pixelsIn(img image.Image, want color.RGBA, x0, x1, y0, y1 int) (n int, meanX float64) {
	sum := 0
	for y := y0; y < y1; y++ {
		for x := x0; x < x1; x++ {
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

// rowsOf returns the first and last rows holding a run of at least four
// adjacent pixels of exactly colour want (antialiased text, whose edges
// can take any grey, makes no such run) in columns [x0, x1) and rows
// [y0, y1); -1, -1 when there is none.
func rowsOf(img image.Image, want color.RGBA, x0, x1, y0, y1 int) (top, bottom int) {
	top, bottom = -1, -1
	for y := y0; y < y1; y++ {
		run := 0
		for x := x0; x < x1 && run < 4; x++ {
			if near(img.At(x, y), want, 2) {
				run++
			} else {
				run = 0
			}
		}
		if run >= 4 {
			if top < 0 {
				top = y
			}
			bottom = y
		}
	}
	return top, bottom
}
