package glm

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// simulated returns n rows of two covariates, x1 ~ N(3, 2²) and
// x2 ~ Bern(0.4), with w ~ Bern(σ(−0.5 + 0.8 z1 + 1.2 x2)) and
// y = 1 + 2 x1 − 3 x2 + N(0, 0.5²), z1 = (x1 − 3)/2.
func simulated(seed uint64, n int) (x *mat.Dense, w, y []float64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	x = mat.NewDense(n, 2, nil)
	w, y = make([]float64, n), make([]float64, n)
	for i := range n {
		x1 := 3 + 2*rng.NormFloat64()
		x2 := 0.0
		if rng.Float64() < 0.4 {
			x2 = 1
		}
		x.Set(i, 0, x1)
		x.Set(i, 1, x2)
		if rng.Float64() < 1/(1+math.Exp(-(-0.5+0.8*(x1-3)/2+1.2*x2))) {
			w[i] = 1
		}
		y[i] = 1 + 2*x1 - 3*x2 + 0.5*rng.NormFloat64()
	}
	return x, w, y
}

func TestGradientFiniteDifference(t *testing.T) {
	x, w, _ := simulated(1, 60)
	defer setDesignChunk(7)() // several chunks of rows
	z, err := newDesign(x, len(w))
	if err != nil {
		t.Fatal(err)
	}
	k := z.d + 1
	const ridge = 0.7
	beta := []float64{0.3, -0.7, 1.1}
	g := make([]float64, k)
	p := make([]float64, len(w))
	gradient(z, w, beta, p, g, ridge)
	h := mat.NewSymDense(k, nil)
	hessian(z, p, h, make([]float64, k*k), ridge)
	const eps = 1e-6
	for j := range k {
		up, down := append([]float64(nil), beta...), append([]float64(nil), beta...)
		up[j] += eps
		down[j] -= eps
		fd := -(penalisedLoss(z, w, up, ridge) - penalisedLoss(z, w, down, ridge)) / (2 * eps)
		if math.Abs(fd-g[j]) > 1e-5*math.Max(1, math.Abs(fd)) {
			t.Errorf("gradient %d: %v, finite difference %v", j, g[j], fd)
		}
		gu, gd := make([]float64, k), make([]float64, k)
		gradient(z, w, up, make([]float64, len(w)), gu, ridge)
		gradient(z, w, down, make([]float64, len(w)), gd, ridge)
		for i := range k {
			fh := -(gu[i] - gd[i]) / (2 * eps)
			if math.Abs(fh-h.At(i, j)) > 1e-5*math.Max(1, math.Abs(fh)) {
				t.Errorf("Hessian (%d,%d): %v, finite difference %v", i, j, h.At(i, j), fh)
			}
		}
	}
}

// TestFitsRecoverTheTruth: on 20 000 simulated rows both fits predict new
// rows' true means closely, and their coefficients on the raw scale are
// the simulation's.
func TestFitsRecoverTheTruth(t *testing.T) {
	x, w, y := simulated(2, 20000)
	lin, err := FitLinear(x, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	logit, err := FitLogistic(context.Background(), x, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Raw-scale coefficients: β_j / scale_j.
	if b1, b2 := lin.Beta[1]/lin.Scale[0], lin.Beta[2]/lin.Scale[1]; math.Abs(b1-2) > 0.02 || math.Abs(b2+3) > 0.03 {
		t.Errorf("least squares slopes %.4f, %.4f; want 2, -3", b1, b2)
	}
	if b1, b2 := logit.Beta[1]/logit.Scale[0]*2, logit.Beta[2]/logit.Scale[1]; math.Abs(b1-0.8) > 0.08 || math.Abs(b2-1.2) > 0.12 {
		t.Errorf("logistic slopes %.3f (per z1), %.3f; want 0.8, 1.2", b1, b2)
	}
	fresh, _, _ := simulated(3, 200)
	mu, err := lin.Predict(nil, fresh)
	if err != nil {
		t.Fatal(err)
	}
	e, err := logit.Predict(nil, fresh)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		x1, x2 := fresh.At(i, 0), fresh.At(i, 1)
		if d := math.Abs(mu[i] - (1 + 2*x1 - 3*x2)); d > 0.1 {
			t.Errorf("row %d: mean %.3f, true %.3f", i, mu[i], 1+2*x1-3*x2)
		}
		if d := math.Abs(e[i] - 1/(1+math.Exp(-(-0.5+0.8*(x1-3)/2+1.2*x2)))); d > 0.05 {
			t.Errorf("row %d: propensity %.3f off by %.3f", i, e[i], d)
		}
	}
}

// TestConstantColumnAndSeparation: a constant covariate is left out, and
// a covariate that separates the classes keeps finite coefficients under
// the ridge.
func TestConstantColumnAndSeparation(t *testing.T) {
	n := 50
	x := mat.NewDense(n, 2, nil)
	w := make([]float64, n)
	for i := range n {
		x.Set(i, 0, 5)
		x.Set(i, 1, float64(i))
		if i >= n/2 {
			w[i] = 1
		}
	}
	m, err := FitLogistic(context.Background(), x, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	if m.Scale[0] != 0 || math.IsInf(m.Beta[2], 0) || math.IsNaN(m.Beta[2]) {
		t.Errorf("model %+v", m)
	}
	p, err := m.Predict(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if p[0] > 0.1 || p[n-1] < 0.9 {
		t.Errorf("separated classes predicted %.3f and %.3f", p[0], p[n-1])
	}
}

// TestOneClass: a fold whose rows are all treated (a site of 97%
// treated rows gave one) has no maximum likelihood; the fit is the
// shrunk share, and a nearly one-class fit on many binary covariates
// converges.
func TestOneClass(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, d = 80, 30
	x := mat.NewDense(n, d, nil)
	for i := range n {
		for j := range d {
			x.Set(i, j, float64(r.IntN(2)))
		}
	}
	w := make([]float64, n)
	for i := range w {
		w[i] = 1
	}
	m, err := FitLogistic(context.Background(), x, w, 1)
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Predict(nil, x)
	if err != nil {
		t.Fatal(err)
	}
	if want := (n + 0.5) / (n + 1.0); math.Abs(p[0]-want) > 1e-12 || p[n-1] != p[0] {
		t.Errorf("all treated: propensities %v, %v; want %v everywhere", p[0], p[n-1], want)
	}
	w[7] = 0
	if _, err := FitLogistic(context.Background(), x, w, 1); err != nil {
		t.Errorf("one control among %d rows of %d binary covariates: %v", n, d, err)
	}
}

func TestErrors(t *testing.T) {
	x, w, y := simulated(4, 20)
	bad := append([]float64(nil), w...)
	bad[3] = 2
	nan := append([]float64(nil), y...)
	nan[5] = math.NaN()
	m, err := FitLinear(x, y, 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"non-binary class", func() error { _, err := FitLogistic(context.Background(), x, bad, 1); return err }(), "row 3: 2 is not 0 or 1"},
		{"NaN target", func() error { _, err := FitLinear(x, nan, 1); return err }(), "row 5 is NaN"},
		{"short targets", func() error { _, err := FitLinear(x, y[:3], 1); return err }(), "20 rows of covariates, 3 targets"},
		{"no rows", func() error { _, err := FitLinear(&mat.Dense{}, nil, 1); return err }(), "no rows"},
		{"predict other width", func() error { _, err := m.Predict(nil, mat.NewDense(2, 3, nil)); return err }(), "3 covariates, the model has 2"},
		{"damaged model", func() error {
			_, err := (&Model{Mean: m.Mean, Scale: m.Scale, Beta: m.Beta[:2]}).Predict(nil, x)
			return err
		}(), "a model of 2 means, 2 scales and 2 coefficients"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, tc.err, tc.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := FitLogistic(ctx, x, w, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// setDesignChunk sets designChunk to c and returns what restores it.
func setDesignChunk(c int) func() {
	old := designChunk
	designChunk = c
	return func() { designChunk = old }
}

// atOnly hides a matrix's rows, so that the design reads it by At.
type atOnly struct{ mat.Matrix }

// TestChunkedDesign: the fits read the rows a chunk at a time, in place
// or element by element, and come out as from one chunk of every row:
// the logistic fit bit for bit (its sums run over the rows in order), the
// least squares to rounding (BLAS adds its chunks' products).
func TestChunkedDesign(t *testing.T) {
	ctx := context.Background()
	x, w, y := simulated(3, 500)
	wantL, err := FitLogistic(ctx, x, w, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	wantY, err := FitLinear(x, y, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	defer setDesignChunk(64)()
	for _, m := range []mat.Matrix{x, atOnly{x}} {
		gotL, err := FitLogistic(ctx, m, w, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(gotL.Beta, wantL.Beta) || !slices.Equal(gotL.Mean, wantL.Mean) || !slices.Equal(gotL.Scale, wantL.Scale) {
			t.Errorf("%T: logistic fit in chunks %v, in one %v", m, gotL.Beta, wantL.Beta)
		}
		gotY, err := FitLinear(m, y, 0.5)
		if err != nil {
			t.Fatal(err)
		}
		for j, b := range gotY.Beta {
			if math.Abs(b-wantY.Beta[j]) > 1e-12*math.Max(1, math.Abs(b)) {
				t.Errorf("%T: least squares coefficient %d in chunks %v, in one %v", m, j, b, wantY.Beta[j])
			}
		}
	}
}
