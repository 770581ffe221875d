package inference

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// attenuated draws n rows with x ~ N(0, I₂), a true effect
// τ(x) = 2 + x₁ − 0.5x₂, an estimate τ̂ = 0.5τ + 0.3 that is both shifted
// and attenuated, and pseudo-outcomes ψ = τ + N(0, sd²).
func attenuated(rng *rand.Rand, n int, sd float64) (x *mat.Dense, tau, cate, psi []float64) {
	x = mat.NewDense(n, 2, nil)
	tau, cate, psi = make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		x.Set(i, 0, a)
		x.Set(i, 1, b)
		tau[i] = 2 + a - 0.5*b
		cate[i] = 0.5*tau[i] + 0.3
		psi[i] = tau[i] + sd*rng.NormFloat64()
	}
	return x, tau, cate, psi
}

func TestCalibrationRecoversALinearBias(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	x, tau, cate, psi := attenuated(rng, 400, 0)
	c, err := FitCalibration(psi, cate, x)
	if err != nil {
		t.Fatal(err)
	}
	got, se, lo, hi, err := c.Interval(cate, x)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if math.Abs(got[i]-tau[i]) > 1e-3 || se[i] > 1e-3 || lo[i] > got[i] || hi[i] < got[i] {
			t.Fatalf("row %d: %v [%v, %v] (se %v), true %v", i, got[i], lo[i], hi[i], se[i], tau[i])
		}
	}
	if c.Lambda != calibrationGrid[0] {
		t.Errorf("λ = %v for noiseless pseudo-outcomes, want the smallest, %v", c.Lambda, calibrationGrid[0])
	}
}

// TestCalibrationCoverage measures the per-row coverage of τ(x) over
// replicates, and shows that the uncorrected estimate is far off.
func TestCalibrationCoverage(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	cov, after, before := replicateCoverage(t, 200, func() (*mat.Dense, []float64, []float64, []float64) { return attenuated(rng, 500, 2) }, nil)
	if cov < 0.90 || cov > 0.99 {
		t.Errorf("per-row coverage %.3f, want about 0.95", cov)
	}
	if after > 0.25 || before < 0.8 {
		t.Errorf("sqrt(PEHE) %.3f before the correction, %.3f after; want > 0.8 and < 0.25", before, after)
	}
}

// replicateCoverage fits and applies a calibration to reps draws of rows
// (covariates, true effects, estimates, scores), checking each fit with
// check when not nil, and returns the per-row coverage of the true
// effects by the intervals, and the √PEHE after and before the correction.
func replicateCoverage(t *testing.T, reps int, draw func() (*mat.Dense, []float64, []float64, []float64), check func(*Calibration)) (cov, after, before float64) {
	t.Helper()
	var covered, rows float64
	for range reps {
		x, tau, cate, psi := draw()
		c, err := FitCalibration(psi, cate, x)
		if err != nil {
			t.Fatal(err)
		}
		if check != nil {
			check(c)
		}
		got, _, lo, hi, err := c.Interval(cate, x)
		if err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if lo[i] <= tau[i] && tau[i] <= hi[i] {
				covered++
			}
			rows++
			before += (cate[i] - tau[i]) * (cate[i] - tau[i])
			after += (got[i] - tau[i]) * (got[i] - tau[i])
		}
	}
	return covered / rows, math.Sqrt(after / rows), math.Sqrt(before / rows)
}

func TestCalibrationErrors(t *testing.T) {
	x := mat.NewDense(3, 2, []float64{1, 2, 3, 4, 5, 7})
	for _, tc := range []struct {
		name      string
		psi, cate []float64
	}{
		{"lengths", []float64{1, 2}, []float64{1, 2, 3}},
		{"too few rows", []float64{1, 2, 3}, []float64{1, 2, 3}},
	} {
		if _, err := FitCalibration(tc.psi, tc.cate, x); !errors.Is(err, ErrInput) {
			t.Errorf("%s: error %v, want ErrInput", tc.name, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	xs, _, cate, psi := attenuated(rng, 50, 1)
	psi[7] = math.NaN()
	if _, err := FitCalibration(psi, cate, xs); !errors.Is(err, ErrInput) {
		t.Errorf("NaN pseudo-outcome: error %v, want ErrInput", err)
	}
	psi[7] = 0
	c, err := FitCalibration(psi, cate, xs)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, _, err := c.Interval(cate[:2], mat.NewDense(2, 3, nil)); !errors.Is(err, ErrInput) {
		t.Errorf("Interval of 3 estimates for 3 rows of other width: error %v, want ErrInput", err)
	}
}

func TestCalibrationParamsRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 3))
	x, _, cate, psi := attenuated(rng, 100, 1)
	c, err := FitCalibration(psi, cate, x)
	if err != nil {
		t.Fatal(err)
	}
	if c.orth != nil {
		t.Fatal("an estimate linear in x kept its residual")
	}
	checkRoundTrip(t, c, cate, x)
	x, _, cate, psi = wiggly(rng, 100, 1, func(a, b float64) float64 { return a }, func(a, b float64) float64 { return a * b })
	if c, err = FitCalibration(psi, cate, x); err != nil {
		t.Fatal(err)
	}
	if c.orth == nil {
		t.Fatal("an estimate not linear in x lost its residual")
	}
	checkRoundTrip(t, c, cate, x)
	bad := c.Params()
	bad.Orth = bad.Orth[1:]
	if _, err := NewCalibration(bad); !errors.Is(err, ErrInput) {
		t.Errorf("short coefficients of τ̂: error %v, want ErrInput", err)
	}
	bad = c.Params()
	bad.OrthScale = 0
	if _, err := NewCalibration(bad); !errors.Is(err, ErrInput) {
		t.Errorf("zero scale of τ̂'s residual: error %v, want ErrInput", err)
	}
	bad = c.Params()
	bad.Wald = bad.Wald[1:]
	if _, err := NewCalibration(bad); !errors.Is(err, ErrInput) {
		t.Errorf("short Wald coefficients: error %v, want ErrInput", err)
	}
}

// checkRoundTrip checks that c rebuilt from its Params gives the same
// estimates and standard errors, and that NewCalibration refuses broken
// Params.
func checkRoundTrip(t *testing.T, c *Calibration, cate []float64, x mat.Matrix) {
	t.Helper()
	c2, err := NewCalibration(c.Params())
	if err != nil {
		t.Fatal(err)
	}
	a, sa, _, _, _ := c.Interval(cate, x)
	b, sb, _, _, _ := c2.Interval(cate, x)
	for i := range a {
		if a[i] != b[i] || sa[i] != sb[i] {
			t.Fatalf("row %d: %v ± %v, rebuilt %v ± %v", i, a[i], sa[i], b[i], sb[i])
		}
	}
	bad := c.Params()
	bad.Cov[1] += 1
	if _, err := NewCalibration(bad); !errors.Is(err, ErrInput) {
		t.Errorf("asymmetric covariance: error %v, want ErrInput", err)
	}
	bad = c.Params()
	bad.Coef = bad.Coef[:1]
	if _, err := NewCalibration(bad); !errors.Is(err, ErrInput) {
		t.Errorf("short coefficients: error %v, want ErrInput", err)
	}
	bad = c.Params()
	bad.Scale[0] = 0
	if _, err := NewCalibration(bad); !errors.Is(err, ErrInput) {
		t.Errorf("zero scale: error %v, want ErrInput", err)
	}
}

// TestCalibrationShrinksNoise gives pseudo-outcomes that say nothing beyond
// τ̂: noisy, few rows, many covariates. The correction must be shrunk to
// (nearly) nothing instead of adding its noise to every row.
func TestCalibrationShrinksNoise(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	const n, d = 100, 20
	var worse int
	var shrink float64
	const reps = 50
	for range reps {
		x := mat.NewDense(n, d, nil)
		cate, psi := make([]float64, n), make([]float64, n)
		for i := range n {
			for j := range d {
				x.Set(i, j, rng.NormFloat64())
			}
			cate[i] = 1 + x.At(i, 0) // and the truth
			psi[i] = cate[i] + 4*rng.NormFloat64()
		}
		c, err := FitCalibration(psi, cate, x)
		if err != nil {
			t.Fatal(err)
		}
		shrink += c.Shrink / reps
		got, _, _, _, err := c.Interval(cate, x)
		if err != nil {
			t.Fatal(err)
		}
		var sq float64
		for i := range got {
			sq += (got[i] - cate[i]) * (got[i] - cate[i])
		}
		if math.Sqrt(sq/n) > 0.5 {
			worse++
		}
	}
	if shrink > 0.3 || worse > reps/10 {
		t.Errorf("mean shrinkage %.2f, %d of %d fits moved the right CATE by sqrt(PEHE) > 0.5; want ≤ 0.3 and ≤ %d", shrink, worse, reps, reps/10)
	}
}

// TestCalibrationIntervalIsTheUnshrunkOnes: where the correction is shrunk
// (c < 1), the interval is the Wald interval of the unshrunk estimate at
// the least penalty, whose centre and standard error agree, widened only
// to hold the shrunk point.
func TestCalibrationIntervalIsTheUnshrunkOnes(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	const n, d = 100, 20
	x := mat.NewDense(n, d, nil)
	cate, psi := make([]float64, n), make([]float64, n)
	for i := range n {
		for j := range d {
			x.Set(i, j, rng.NormFloat64())
		}
		cate[i] = 1 + x.At(i, 0)
		psi[i] = cate[i] + 4*rng.NormFloat64()
	}
	c, err := FitCalibration(psi, cate, x)
	if err != nil {
		t.Fatal(err)
	}
	if !(c.Shrink < 1) {
		t.Fatalf("shrinkage %v: the test needs a shrunk correction", c.Shrink)
	}
	full := *c
	full.Shrink, full.coef = 1, full.wald
	centre, _, _, _, err := full.Interval(cate, x)
	if err != nil {
		t.Fatal(err)
	}
	got, se, lo, hi, err := c.Interval(cate, x)
	if err != nil {
		t.Fatal(err)
	}
	var widened int
	for i := range got {
		wl, wh := centre[i]-z*se[i], centre[i]+z*se[i]
		if !(lo[i] <= got[i] && got[i] <= hi[i]) {
			t.Fatalf("row %d: the estimate %v is outside its interval [%v, %v]", i, got[i], lo[i], hi[i])
		}
		if lo[i] != min(wl, got[i]) || hi[i] != max(wh, got[i]) {
			t.Fatalf("row %d: interval [%v, %v], want the unshrunk Wald interval [%v, %v] holding %v", i, lo[i], hi[i], wl, wh, got[i])
		}
		if lo[i] != wl || hi[i] != wh {
			widened++
		}
	}
	t.Logf("shrinkage %.2f; %d of %d intervals widened to hold the estimate", c.Shrink, widened, n)
}

// wiggly draws n rows with x ~ N(0, I₂), a true effect τ(x) and an
// estimate τ̂ = τ + bump, both functions of x, and pseudo-outcomes
// ψ = τ + N(0, sd²).
func wiggly(rng *rand.Rand, n int, sd float64, tau, bump func(a, b float64) float64) (x *mat.Dense, truth, cate, psi []float64) {
	x = mat.NewDense(n, 2, nil)
	truth, cate, psi = make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		a, b := rng.NormFloat64(), rng.NormFloat64()
		x.Set(i, 0, a)
		x.Set(i, 1, b)
		truth[i] = tau(a, b)
		cate[i] = truth[i] + bump(a, b)
		psi[i] = truth[i] + sd*rng.NormFloat64()
	}
	return x, truth, cate, psi
}

// TestCalibrationRemovesNonlinearNoise gives a linear effect and an
// estimate whose error is not linear in x, as a flexible learner's is on
// a linear effect. The correction must take the error out (the offset
// alone cannot), so that the intervals reach their coverage; and where
// the estimate's non-linear part is the effect's, it must keep it.
func TestCalibrationRemovesNonlinearNoise(t *testing.T) {
	linear := func(a, b float64) float64 { return 2 + a - 0.5*b }
	noise := func(a, b float64) float64 { return 0.6 * math.Sin(2*a) * math.Cos(b) }
	curved := func(a, b float64) float64 { return 2 + math.Sin(2*a)*math.Cos(b) }
	none := func(a, b float64) float64 { return 0 }
	cases := []struct {
		name      string
		tau, bump func(a, b float64) float64
		// the most per-row coverage may miss 0.95 by, and the largest
		// √PEHE of the corrected estimate
		slack, pehe float64
	}{
		{"linear effect, non-linear error", linear, noise, 0.05, 0.25},
		{"non-linear effect, right estimate", curved, none, 0.05, 0.15},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(21, 22))
			cov, pehe, before := replicateCoverage(t, 100, func() (*mat.Dense, []float64, []float64, []float64) {
				return wiggly(rng, 500, 2, tc.tau, tc.bump)
			}, func(c *Calibration) {
				if c.orth == nil {
					t.Fatal("τ̂'s non-linear part left out")
				}
			})
			t.Logf("coverage %.3f, √PEHE %.3f (uncorrected %.3f)", cov, pehe, before)
			if math.Abs(cov-0.95) > tc.slack || pehe > tc.pehe {
				t.Errorf("coverage %.3f, √PEHE %.3f; want 0.95 ± %.2f and at most %.2f", cov, pehe, tc.slack, tc.pehe)
			}
		})
	}
}

// TestCalibrationLeaveOneOut: the closed-form leave-one-out error of each
// penalty, computed a chunk of rows at a time, is that of refitting
// without each row in turn; and the sandwich's middle sum, added a chunk
// at a time, is Σ e_i² z_i z_iᵀ row by row. Chunks of 7 rows split the 60.
func TestCalibrationLeaveOneOut(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	x, _, cate, psi := attenuated(rng, 60, 0.5)
	for i := range cate {
		cate[i] += 0.3 * math.Sin(3*x.At(i, 0)) // a part not linear in x: u is in
	}
	c, err := FitCalibration(psi, cate, x)
	if err != nil {
		t.Fatal(err)
	}
	if c.orth == nil {
		t.Fatal("u left out")
	}
	defer func(old int) { calibrationChunk = old }(calibrationChunk)
	calibrationChunk = 7
	n, p := len(cate), len(c.coef)
	r := make([]float64, n)
	for i := range r {
		r[i] = psi[i] - cate[i]
	}
	ztz, ztr := c.normal(x, cate, r)
	var fits []*penalised
	for _, l := range []float64{1e-3, 0.3} {
		a := mat.NewSymDense(p, nil)
		a.CopySym(ztz)
		for j := 1; j < p; j++ {
			a.SetSym(j, j, a.At(j, j)+l*float64(n))
		}
		f := &penalised{lambda: l}
		if !f.ch.Factorize(a) || f.ch.SolveVecTo(&f.g, ztr) != nil || f.ch.InverseTo(&f.inv) != nil {
			t.Fatal("singular")
		}
		fits = append(fits, f)
	}
	c.looErrors(x, cate, r, fits)
	covs := c.sandwiches(x, cate, r, fits...)
	zi := mat.NewVecDense(p, nil)
	for k, f := range fits {
		var loo float64
		meat := mat.NewSymDense(p, nil)
		for i := range n {
			c.row(zi.RawVector().Data, x, i, cate[i])
			// Refit without row i: A − z_i z_iᵀ, Zᵀr − z_i r_i.
			a := mat.NewSymDense(p, nil)
			a.CopySym(ztz)
			a.SymRankOne(a, -1, zi)
			for j := 1; j < p; j++ {
				a.SetSym(j, j, a.At(j, j)+f.lambda*float64(n))
			}
			var b, g mat.VecDense
			b.AddScaledVec(ztr, -r[i], zi)
			var ch mat.Cholesky
			if !ch.Factorize(a) || ch.SolveVecTo(&g, &b) != nil {
				t.Fatal("singular without a row")
			}
			e := r[i] - mat.Dot(zi, &g)
			loo += e * e
			res := r[i] - mat.Dot(zi, &f.g)
			meat.SymRankOne(meat, res*res, zi)
		}
		if math.Abs(f.loo-loo) > 1e-9*loo {
			t.Errorf("λ %v: leave-one-out error %v, refitting gives %v", f.lambda, f.loo, loo)
		}
		var m1, m2 mat.Dense
		m1.Mul(&f.inv, meat)
		m2.Mul(&m1, &f.inv)
		for a := range p {
			for b := range p {
				want := float64(n) / float64(n-p) * 0.5 * (m2.At(a, b) + m2.At(b, a))
				if math.Abs(covs[k].At(a, b)-want) > 1e-9*math.Max(1e-12, math.Abs(want)) {
					t.Fatalf("λ %v: covariance (%d,%d) %v, row by row %v", f.lambda, a, b, covs[k].At(a, b), want)
				}
			}
		}
	}
}
