package report

// Pixel checks of rendered figures. They find a series by its colour,
// which works because each series of the report has a colour no other
// figure's series uses (plots.go, balance.go). To check a new figure,
// render it (or the page holding it, then figureIn), and list in a
// colourCheck table each series, its colour and the region of the figure
// where it must show, and those where it must not.

import (
	"bytes"
	"encoding/base64"
	"html"
	"image"
	"image/color"
	"image/png"
	"math"
	"regexp"
	"strings"
	"testing"
)

// decodeFigure decodes the PNG of a rendered figure.
func decodeFigure(t testing.TB, f Figure) image.Image {
	t.Helper()
	src := strings.TrimSuffix(strings.TrimPrefix(string(f.Src), `src="data:image/png;base64,`), `"`)
	return decodePNG(t, src)
}

// decodePNG decodes a base64 PNG.
func decodePNG(t testing.TB, b64 string) image.Image {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return img
}

var pageImage = regexp.MustCompile(`<img src="data:image/png;base64,([A-Za-z0-9+/=]+)" alt="([^"]*)"`)

// figureIn decodes the figure of an HTML page whose text alternative
// starts with alt; it fails the test unless exactly one does.
func figureIn(t testing.TB, page, alt string) image.Image {
	t.Helper()
	var found []string
	for _, m := range pageImage.FindAllStringSubmatch(page, -1) {
		if strings.HasPrefix(html.UnescapeString(m[2]), alt) {
			found = append(found, m[1])
		}
	}
	if len(found) != 1 {
		t.Fatalf("page has %d figures whose alt text starts %q, want 1", len(found), alt)
	}
	return decodePNG(t, found[0])
}

// near reports whether c is within tol of want in every channel.
func near(c color.Color, want color.RGBA, tol int) bool {
	r, g, b, _ := c.RGBA()
	d := func(x uint32, y uint8) bool { return int(math.Abs(float64(int(x>>8)-int(y)))) <= tol }
	return d(r, want.R) && d(g, want.G) && d(b, want.B)
}

// colourTol is how far from a series' colour a pixel may be and still
// count as the series': antialiased edges blend it with the background,
// and a tolerance well below the distance between any two of the
// report's colours keeps one series from counting as another.
const colourTol = 30

// countColour counts the pixels of colour want in the rectangle r of
// img (clipped to its bounds), with their mean x; NaN when none.
func countColour(img image.Image, want color.RGBA, r image.Rectangle) (n int, meanX float64) {
	r = r.Intersect(img.Bounds())
	sum := 0
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			if near(img.At(x, y), want, colourTol) {
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

// pixels counts the pixels of colour want in rows [y0, y1) of img, with
// their mean x.
func pixels(img image.Image, want color.RGBA, y0, y1 int) (n int, meanX float64) {
	b := img.Bounds()
	return countColour(img, want, image.Rect(b.Min.X, y0, b.Max.X, y1))
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

// region is a part of a figure in fractions of its width and height,
// from the top left corner (x0, y0) to the bottom right (x1, y1), so that
// a check survives a change of the figure's size.
type region struct{ x0, y0, x1, y1 float64 }

var (
	whole     = region{0, 0, 1, 1}
	upperHalf = region{0, 0, 1, 0.5}
	lowerHalf = region{0, 0.5, 1, 1}
)

// in returns the pixels of r in an image of bounds b.
func (r region) in(b image.Rectangle) image.Rectangle {
	at := func(min, size int, f float64) int { return min + int(math.Round(f*float64(size))) }
	return image.Rect(at(b.Min.X, b.Dx(), r.x0), at(b.Min.Y, b.Dy(), r.y0), at(b.Min.X, b.Dx(), r.x1), at(b.Min.Y, b.Dy(), r.y1))
}

// colourCheck says where a series of a figure must show: at least min
// pixels of its colour in region in, and none in any region of out.
type colourCheck struct {
	name string
	col  color.RGBA
	in   region
	min  int
	out  []region
}

// checkColours runs checks on img, the figure called fig in messages.
func checkColours(t testing.TB, fig string, img image.Image, checks []colourCheck) {
	t.Helper()
	b := img.Bounds()
	for _, c := range checks {
		if n, _ := countColour(img, c.col, c.in.in(b)); n < c.min {
			t.Errorf("%s, %s: %d pixels of colour %v in %v of the %v image, want at least %d: the series is missing or squashed",
				fig, c.name, n, c.col, c.in.in(b), b.Size(), c.min)
		}
		for _, out := range c.out {
			if n, _ := countColour(img, c.col, out.in(b)); n > 0 {
				t.Errorf("%s, %s: %d pixels of colour %v in %v of the %v image, want none there",
					fig, c.name, n, c.col, out.in(b), b.Size())
			}
		}
	}
}
