package synth

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/dataset"
)

func TestClassFrequencies(t *testing.T) {
	const n = 200000
	w := newWorld(1, DefaultProxies)
	_, class := w.source(n, 0, false, sourceSrc(1, 0))
	var count [classes]int
	for _, k := range class {
		count[k]++
	}
	for k, c := range count {
		// The standard error of a frequency is at most 0.5/sqrt(n) ≈ 0.0011.
		if got := float64(c) / n; math.Abs(got-rho[k]) > 0.006 {
			t.Errorf("class %d: frequency %.4f, want %.2f", k+1, got, rho[k])
		}
	}
}

// moments returns the mean and variance of x.
func moments(x []float64) (mean, variance float64) {
	for _, v := range x {
		mean += v
	}
	mean /= float64(len(x))
	for _, v := range x {
		variance += (v - mean) * (v - mean)
	}
	return mean, variance / float64(len(x)-1)
}

// potential returns y(0) and y(1) of every row of t.
func potential(t *dataset.Table) (y0, y1 []float64) {
	for i, w := range t.W {
		if w == 1 {
			y0, y1 = append(y0, t.YCF[i]), append(y1, t.Y[i])
		} else {
			y0, y1 = append(y0, t.Y[i]), append(y1, t.YCF[i])
		}
	}
	return y0, y1
}

func TestConditionals(t *testing.T) {
	const n = 100000
	for _, tc := range []struct {
		binary bool
		delta  float64
	}{{false, 0}, {false, 1.5}, {true, 0}, {true, -2}} {
		w := newWorld(7, DefaultProxies)
		tab, class := w.source(n, tc.delta, tc.binary, sourceSrc(7, 3))
		y0, y1 := potential(tab)
		byClass := make([][]int, classes)
		for i, k := range class {
			byClass[k] = append(byClass[k], i)
		}
		for k, rows := range byClass {
			m := float64(len(rows))
			tol := 5 / math.Sqrt(m) // 5 standard errors of a unit-variance mean
			want0, want1 := softplus(c0+w.c1[k]+tc.delta), softplus(d0+w.d1[k]+tc.delta)
			if tc.binary {
				want0, want1 = sigmoid(binC0+w.c1[k]+tc.delta), sigmoid(binD0+w.d1[k]+tc.delta)
			}
			var sw, s0, s1, sx float64
			r0, r1 := make([]float64, 0, len(rows)), make([]float64, 0, len(rows))
			for _, i := range rows {
				if tab.Mu0[i] != want0 || tab.Mu1[i] != want1 {
					t.Fatalf("binary %t, Δ %v, row %d: mu0, mu1 = %v, %v, want %v, %v",
						tc.binary, tc.delta, i, tab.Mu0[i], tab.Mu1[i], want0, want1)
				}
				sw += tab.W[i]
				s0 += y0[i]
				s1 += y1[i]
				sx += tab.X.At(i, 0)
				r0, r1 = append(r0, y0[i]-want0), append(r1, y1[i]-want1)
			}
			if got, want := sw/m, sigmoid(b0+w.b1[k]+tc.delta); math.Abs(got-want) > tol {
				t.Errorf("binary %t, Δ %v, class %d: treated %.4f, want %.4f", tc.binary, tc.delta, k+1, got, want)
			}
			if got, want := sx/m, sigmoid(w.a0[0]+w.a1[0][k]); math.Abs(got-want) > tol {
				t.Errorf("binary %t, Δ %v, class %d: mean x1 %.4f, want %.4f", tc.binary, tc.delta, k+1, got, want)
			}
			if got := s0 / m; math.Abs(got-want0) > tol {
				t.Errorf("binary %t, Δ %v, class %d: mean y(0) %.4f, want %.4f", tc.binary, tc.delta, k+1, got, want0)
			}
			if got := s1 / m; math.Abs(got-want1) > tol {
				t.Errorf("binary %t, Δ %v, class %d: mean y(1) %.4f, want %.4f", tc.binary, tc.delta, k+1, got, want1)
			}
			if !tc.binary {
				for arm, r := range [][]float64{r0, r1} {
					if _, v := moments(r); math.Abs(v-1) > 0.1 {
						t.Errorf("Δ %v, class %d: variance of y(%d) %.4f, want 1", tc.delta, k+1, arm, v)
					}
				}
			}
		}
		// The overall mean of y(0) is the ρ-weighted softplus mean.
		var want0 float64
		for k := range classes {
			if tc.binary {
				want0 += rho[k] * sigmoid(binC0+w.c1[k]+tc.delta)
			} else {
				want0 += rho[k] * softplus(c0+w.c1[k]+tc.delta)
			}
		}
		mean0, var0 := moments(y0)
		if se := math.Sqrt(var0 / n); math.Abs(mean0-want0) > 5*se+0.01 {
			t.Errorf("binary %t, Δ %v: mean y(0) %.4f, want %.4f", tc.binary, tc.delta, mean0, want0)
		}
	}
}

func TestDeterminism(t *testing.T) {
	d := Design{Sources: 3, Rows: 50, Delta: []float64{0, 1, 4}, Seed: 42}
	a, err := Generate(d)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Generate(d)
	if err != nil {
		t.Fatal(err)
	}
	for s := range a {
		if !equal(a[s], b[s]) {
			t.Errorf("source %d differs between two runs with the same seed", s+1)
		}
	}

	d.Seed = 43
	c, err := Generate(d)
	if err != nil {
		t.Fatal(err)
	}
	for s := range a {
		if slices.Equal(a[s].Y, c[s].Y) || mat.Equal(a[s].X, c[s].X) {
			t.Errorf("source %d is the same for seeds 42 and 43", s+1)
		}
	}

	// Sources are independent streams: the first sources of a longer
	// design are the sources of the shorter one.
	more, err := Generate(Design{Sources: 5, Rows: 50, Delta: []float64{0, 1, 4, 2, 2}, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	for s := range a {
		if !equal(a[s], more[s]) {
			t.Errorf("source %d changes when more sources are generated", s+1)
		}
	}
	if equal(a[0], a[1]) {
		t.Errorf("sources 1 and 2 are identical")
	}
}

func TestDeltaShifts(t *testing.T) {
	for _, binary := range []bool{false, true} {
		base, err := Generate(Design{Sources: 2, Rows: 2000, Seed: 5, BinaryOutcome: binary})
		if err != nil {
			t.Fatal(err)
		}
		shifted, err := Generate(Design{Sources: 2, Rows: 2000, Delta: []float64{0, 3}, Seed: 5, BinaryOutcome: binary})
		if err != nil {
			t.Fatal(err)
		}
		if !equal(base[0], shifted[0]) {
			t.Errorf("binary %t: source 1 changed with the Δ of source 2", binary)
		}
		b, s := base[1], shifted[1]
		if !mat.Equal(b.X, s.X) {
			t.Errorf("binary %t: covariates changed with Δ", binary)
		}
		var moreTreated int
		for i := range b.W {
			// Same random numbers, higher probabilities and means.
			if s.W[i] < b.W[i] {
				t.Fatalf("binary %t, row %d: treated at Δ = 0 but not at Δ = 3", binary, i+1)
			}
			if s.Mu0[i] <= b.Mu0[i] || s.Mu1[i] <= b.Mu1[i] {
				t.Fatalf("binary %t, row %d: mu0, mu1 = %v, %v at Δ = 3, not above %v, %v at Δ = 0",
					binary, i+1, s.Mu0[i], s.Mu1[i], b.Mu0[i], b.Mu1[i])
			}
			moreTreated += int(s.W[i] - b.W[i])
		}
		if moreTreated == 0 {
			t.Errorf("binary %t: Δ = 3 treated no more rows than Δ = 0", binary)
		}
	}
}

func TestBinaryOutcome(t *testing.T) {
	src, err := Generate(Design{Sources: 3, Rows: 1000, Delta: []float64{0, 1, 2}, Seed: 9, BinaryOutcome: true})
	if err != nil {
		t.Fatal(err)
	}
	schema, err := dataset.InferSchema(src...)
	if err != nil {
		t.Fatal(err)
	}
	if !schema.BinaryOutcome || len(schema.Binary) != DefaultProxies {
		t.Errorf("schema %+v, want a binary outcome and %d covariates", schema, DefaultProxies)
	}
	for j, b := range schema.Binary {
		if !b {
			t.Errorf("proxy x%d is not binary", j+1)
		}
	}
	var ate float64
	var n int
	for s, tab := range src {
		for i := range tab.W {
			for _, y := range []float64{tab.Y[i], tab.YCF[i]} {
				if y != 0 && y != 1 {
					t.Fatalf("source %d, row %d: outcome %v not 0 or 1", s+1, i+1, y)
				}
			}
			if !(tab.Mu0[i] > 0 && tab.Mu0[i] < 1 && tab.Mu1[i] > 0 && tab.Mu1[i] < 1) {
				t.Fatalf("source %d, row %d: probabilities %v, %v outside (0, 1)", s+1, i+1, tab.Mu0[i], tab.Mu1[i])
			}
		}
		for _, tau := range tab.Tau() {
			ate += tau
			n++
		}
	}
	if ate /= float64(n); !(ate > -1 && ate < 1) || ate == 0 {
		t.Errorf("true ATE %v, want a nonzero risk difference", ate)
	}
}

func TestWriteRead(t *testing.T) {
	src, err := Generate(Design{Sources: 3, Rows: 40, Delta: []float64{0, 4, 4}, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	all, err := dataset.Concat(src...)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := dataset.Write(&buf, all); err != nil {
		t.Fatal(err)
	}
	back, err := dataset.Read(&buf, "synth.csv")
	if err != nil {
		t.Fatal(err)
	}
	if back.Rows() != 120 || back.Covariates() != DefaultProxies {
		t.Fatalf("read %d×%d, want 120×%d", back.Rows(), back.Covariates(), DefaultProxies)
	}
	again, err := back.Sources(40)
	if err != nil {
		t.Fatal(err)
	}
	for s := range src {
		if !equal(src[s], again[s]) {
			t.Errorf("source %d changed through Write and Read", s+1)
		}
	}
}

func TestLargeSetting(t *testing.T) {
	if testing.Short() {
		t.Skip("large setting skipped in short mode")
	}
	delta, err := UniformDeltas(100, 0, 8, 1)
	if err != nil {
		t.Fatal(err)
	}
	src, err := Generate(Design{Sources: 100, Rows: 1000, Delta: delta, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(src) != 100 {
		t.Fatalf("%d sources, want 100", len(src))
	}
	for s, tab := range src {
		if tab.Rows() != 1000 {
			t.Fatalf("source %d has %d rows", s+1, tab.Rows())
		}
		if err := tab.Validate(); err != nil {
			t.Fatalf("source %d: %v", s+1, err)
		}
	}
}

func TestUniformDeltas(t *testing.T) {
	a, err := UniformDeltas(1000, 0, 8, 11)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := UniformDeltas(1000, 0, 8, 11)
	c, _ := UniformDeltas(1000, 0, 8, 12)
	if !slices.Equal(a, b) || slices.Equal(a, c) {
		t.Errorf("UniformDeltas is not determined by its seed")
	}
	if lo, hi := slices.Min(a), slices.Max(a); lo < 0 || hi > 8 || lo > 0.1 || hi < 7.9 {
		t.Errorf("1000 draws from U[0, 8] span [%v, %v]", lo, hi)
	}
	if mean, _ := moments(a); math.Abs(mean-4) > 0.3 {
		t.Errorf("mean of U[0, 8] draws %v, want about 4", mean)
	}
	if d, err := UniformDeltas(0, 0, 8, 1); err != nil || len(d) != 0 {
		t.Errorf("UniformDeltas(0, ...) = %v, %v", d, err)
	}
	for _, tc := range []struct {
		n      int
		lo, hi float64
	}{{-1, 0, 8}, {3, 8, 0}, {3, math.NaN(), 8}, {3, 0, math.Inf(1)}} {
		if _, err := UniformDeltas(tc.n, tc.lo, tc.hi, 1); !errors.Is(err, ErrDesign) {
			t.Errorf("UniformDeltas(%d, %v, %v): error %v, want ErrDesign", tc.n, tc.lo, tc.hi, err)
		}
	}
}

func TestDesignErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		d       Design
		wantMsg string
	}{
		{"no sources", Design{Rows: 10}, "synth: invalid design: 0 sources, want at least 1"},
		{"no rows", Design{Sources: 2}, "synth: invalid design: 0 rows per source, want at least 1"},
		{"negative proxies", Design{Sources: 1, Rows: 1, Proxies: -1}, "synth: invalid design: -1 proxies, want at least 0"},
		{"short Delta", Design{Sources: 3, Rows: 1, Delta: []float64{0, 1}}, "synth: invalid design: 2 values of Δ for 3 sources"},
		{"NaN Delta", Design{Sources: 2, Rows: 1, Delta: []float64{0, math.NaN()}}, "synth: invalid design: Δ of source 2 is NaN"},
	} {
		src, err := Generate(tc.d)
		if err == nil || src != nil || !errors.Is(err, ErrDesign) || err.Error() != tc.wantMsg {
			t.Errorf("%s: Generate = %v, %v; want error %s", tc.name, src, err, tc.wantMsg)
		}
	}
	src, err := Generate(Design{Sources: 1, Rows: 5, Proxies: 3})
	if err != nil || src[0].Covariates() != 3 {
		t.Errorf("Generate with 3 proxies: %v, %v", src, err)
	}
}

func TestSoftplusSigmoid(t *testing.T) {
	for _, u := range []float64{-800, -30, -1, 0, 0.5, 30, 800} {
		if got := softplus(u); math.IsInf(got, 0) || math.IsNaN(got) || got < 0 ||
			(math.Abs(u) < 30 && math.Abs(got-math.Log(1+math.Exp(u))) > 1e-12) {
			t.Errorf("softplus(%v) = %v", u, got)
		}
		if got := sigmoid(u); got < 0 || got > 1 || math.IsNaN(got) ||
			math.Abs(got+sigmoid(-u)-1) > 1e-15 {
			t.Errorf("sigmoid(%v) = %v", u, got)
		}
	}
}

// equal reports whether a and b hold the same values.
func equal(a, b *dataset.Table) bool {
	return mat.Equal(a.X, b.X) && slices.Equal(a.W, b.W) && slices.Equal(a.Y, b.Y) &&
		slices.Equal(a.YCF, b.YCF) && slices.Equal(a.Mu0, b.Mu0) && slices.Equal(a.Mu1, b.Mu1)
}

// TestBoundsHoldTheDraws: every drawn covariate and real outcome of every
// design, with shifts, lies within Design.Bounds, and only a binary
// outcome has none.
func TestBoundsHoldTheDraws(t *testing.T) {
	for _, name := range DesignNames() {
		for _, binary := range []bool{false, true} {
			if binary && name != DesignPaper {
				continue
			}
			d := Design{Name: name, Sources: 3, Rows: 2000, Delta: []float64{0, 2, -1}, Seed: 3, BinaryOutcome: binary}
			tables, err := Generate(d)
			if err != nil {
				t.Fatal(err)
			}
			b := d.Bounds()
			_, hasY := b["y"]
			if wantY := !binary && name != DesignBinary; hasY != wantY {
				t.Errorf("%s binary=%v: outcome bound %v, want one: %v", name, binary, hasY, wantY)
			}
			names := d.Covariates()
			for _, tb := range tables {
				for i := range tb.Rows() {
					for j, v := range tb.X.RawRowView(i) {
						if r, ok := b[names[j]]; !ok || v < r.Lo || v > r.Hi {
							t.Fatalf("%s: %s = %v outside %v (%v)", name, names[j], v, r, ok)
						}
					}
					if r, ok := b["y"]; ok && (tb.Y[i] < r.Lo || tb.Y[i] > r.Hi || tb.YCF[i] < r.Lo || tb.YCF[i] > r.Hi) {
						t.Fatalf("%s: y = %v (counterfactual %v) outside %v", name, tb.Y[i], tb.YCF[i], r)
					}
				}
			}
		}
	}
}
