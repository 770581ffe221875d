package inference

import (
	"fmt"
	"math"
	"slices"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/internal/mapped"
)

// Calibration is a doubly robust correction of a CATE estimate τ̂: the
// DR-learner (Kennedy 2020) with τ̂ as offset, a ridge regression of the
// residual pseudo-outcomes ψ_i − τ̂(x_i) on [1, z_i, u_i],
//
//	τ̃(x) = τ̂(x) + γ0 + γᵀz + κ·u(x),   z = (x − x̄)/s,
//
// where u(x) is the part of τ̂ that is not linear in x: τ̂'s residual on
// [1, z] over the fitting rows, scaled to unit variance (left out when τ̂
// is linear in x). The intercept is unpenalised and the slopes are
// penalised by λ, chosen among a grid by the leave-one-out error of the
// ridge fit, which has a closed form. E[ψ | x] = τ(x) when the nuisances
// behind ψ are right, so the correction removes what of τ − τ̂ is linear
// in x (all of a constant bias, the attenuation of a linear effect) and
// rescales τ̂'s non-linear part by as much as the rows support: one that
// is noise (a flexible learner's error on a linear effect) is taken out
// (κ near −1 in u's units), one that is signal is kept (κ near 0, where
// the penalty draws it).
//
// The correction is then shrunk toward none by the positive-part
// James–Stein factor c = max(0, 1 − (p − 2)/W), with W = γᵀV⁻¹γ the Wald
// statistic of its p coefficients under their sandwich covariance V: a
// correction that the rows show clearly (W ≫ p) is applied in full, and
// one within its own noise is not, so that pseudo-outcomes too noisy to
// say anything (few rows, poor overlap) leave τ̂ as it is.
//
// Interval returns τ̃(x), the shrunk estimate, with se(x), the sandwich
// standard error of the unshrunk correction at x taking τ̂ as fixed (it
// was fitted on other rows), and the Wald interval of the unshrunk
// estimate ± 1.96·se(x), widened where needed to hold τ̃(x): its centre
// and its standard error are those of one estimator, and it covers τ(x)
// at least as often as that Wald interval, which it does where τ − τ̂ is
// linear in x and u and λ is small, and less often otherwise. Its
// coverage is a measured property, not a guarantee.
type Calibration struct {
	mean, scale []float64 // per covariate, of the fitting rows
	// orth are the coefficients of τ̂ on [1, z] and orthScale the standard
	// deviation of its residual u; nil orth: u is left out.
	orth      []float64
	orthScale float64
	coef      []float64     // γ0, γ, then κ when u is in, at the chosen λ
	wald      []float64     // the same at the least λ, the interval's centre
	cov       *mat.SymDense // wald's sandwich covariance
	// Lambda is the chosen ridge penalty of the slopes.
	Lambda float64
	// Shrink is the James–Stein factor c applied to the correction.
	Shrink float64
	// N is the number of rows the correction was fitted on.
	N int
}

// calibrationGrid are the penalties, in units of n, among which
// FitCalibration chooses by leave-one-out error.
var calibrationGrid = []float64{1e-4, 1e-3, 0.01, 0.03, 0.1, 0.3, 1, 3, 10, 100, 1e4}

// FitCalibration fits the correction of the estimates cate from the
// pseudo-outcomes psi of the same rows, whose covariates are the rows of x.
// It needs more rows than covariates plus one.
func FitCalibration(psi, cate []float64, x mat.Matrix) (*Calibration, error) {
	n, d := x.Dims()
	p := d + 1
	switch {
	case len(psi) != n || len(cate) != n:
		return nil, fmt.Errorf("%w: %d pseudo-outcomes and %d estimates for %d rows", ErrInput, len(psi), len(cate), n)
	case n <= p:
		return nil, fmt.Errorf("%w: %d rows for a correction in %d covariates; want more than %d", ErrInput, n, d, p)
	}
	c := &Calibration{mean: make([]float64, d), scale: make([]float64, d), N: n}
	for j := range d {
		var s, ss float64
		for i := range n {
			v := x.At(i, j)
			s += v
			ss += v * v
		}
		m := s / float64(n)
		c.mean[j] = m
		c.scale[j] = 1
		if v := (ss - float64(n)*m*m) / float64(n-1); v > 1e-12 {
			c.scale[j] = math.Sqrt(v)
		}
	}
	for i := range n {
		if !finite(psi[i]) || !finite(cate[i]) {
			return nil, fmt.Errorf("%w: row %d: pseudo-outcome %v, estimate %v", ErrInput, i, psi[i], cate[i])
		}
	}
	// The design's rows [1, z_i] (then u_i, once fitOrth has fitted it)
	// are made as each pass reads them, a chunk at a time for the normal
	// equations: no copy of every row is held.
	r := mapped.Large(n)
	for i := range n {
		r[i] = psi[i] - cate[i]
	}
	if n > p+1 {
		c.fitOrth(cate, x)
	}
	if c.orth != nil {
		p++
	}
	c.coef = make([]float64, p)
	ztz, ztr := c.normal(x, cate, r)

	// The interval is that of the least-penalised fit (λ = 1e-4·n, nearly
	// least squares but defined for collinear covariates): a penalised
	// fit's sandwich ignores the bias its penalty adds, and a Wald
	// interval about it under-covers (TestCalibrationRemovesNonlinearNoise).
	var fits []*penalised
	for _, l := range calibrationGrid {
		a := mat.NewSymDense(p, nil)
		a.CopySym(ztz)
		for j := 1; j < p; j++ {
			a.SetSym(j, j, a.At(j, j)+l*float64(n))
		}
		f := &penalised{lambda: l}
		if !f.ch.Factorize(a) {
			continue
		}
		if err := f.ch.SolveVecTo(&f.g, ztr); err != nil {
			continue
		}
		if err := f.ch.InverseTo(&f.inv); err != nil {
			continue
		}
		fits = append(fits, f)
	}
	if len(fits) == 0 {
		return nil, fmt.Errorf("%w: the correction's normal equations are singular", ErrInput)
	}
	c.looErrors(x, cate, r, fits)
	best, wald := fits[0], fits[0]
	for _, f := range fits[1:] {
		if f.loo < best.loo {
			best = f
		}
	}
	c.Lambda = best.lambda
	copy(c.coef, best.g.RawVector().Data)
	c.wald = slices.Clone(wald.g.RawVector().Data)
	covs := c.sandwiches(x, cate, r, wald, best)
	c.cov = covs[0]
	pen := covs[1]
	// The James–Stein factor is of the correction it shrinks, the
	// penalised one, under that fit's own sandwich.
	c.Shrink = 1
	var vch mat.Cholesky
	if vch.Factorize(pen) {
		var vg mat.VecDense
		g := mat.NewVecDense(p, c.coef)
		if err := vch.SolveVecTo(&vg, g); err == nil {
			if w := mat.Dot(g, &vg); w > 0 {
				c.Shrink = max(0, 1-float64(p-2)/w)
			}
		}
	}
	return c, nil
}

// calibrationChunk is the most design rows made at once for the normal
// equations; a variable so that tests can split a few rows into chunks.
var calibrationChunk = 1024

// chunks calls f with each chunk of the design's rows in turn (see row:
// p values each, with u when orth is set) and the row its first row is.
func (c *Calibration) chunks(x mat.Matrix, cate []float64, p int, f func(i0 int, zc *mat.Dense)) {
	n, _ := x.Dims()
	z := mat.NewDense(min(n, calibrationChunk), p, nil)
	for i0 := 0; i0 < n; i0 += calibrationChunk {
		i1 := min(n, i0+calibrationChunk)
		zc := z.Slice(0, i1-i0, 0, p).(*mat.Dense)
		for i := i0; i < i1; i++ {
			c.row(zc.RawRowView(i-i0), x, i, cate[i])
		}
		f(i0, zc)
	}
}

// normal returns ZᵀZ and Zᵀv of the design Z, the rows of x made by row
// (with u when orth is set) for the estimates cate, a chunk of rows at a
// time.
func (c *Calibration) normal(x mat.Matrix, cate, v []float64) (*mat.SymDense, *mat.VecDense) {
	p := len(c.mean) + 1
	if c.orth != nil {
		p++
	}
	ztz, ztv := mat.NewSymDense(p, nil), mat.NewVecDense(p, nil)
	var part mat.VecDense
	c.chunks(x, cate, p, func(i0 int, zc *mat.Dense) {
		r, _ := zc.Dims()
		ztz.SymRankK(ztz, 1, zc.T())
		part.MulVec(zc.T(), mat.NewVecDense(r, v[i0:i0+r]))
		ztv.AddVec(ztv, &part)
	})
	return ztz, ztv
}

// fitOrth sets orth and orthScale from the least-squares fit of cate on
// the rows [1, z] of x, or leaves orth nil when cate is linear in x to
// rounding (or the fit is singular): τ̂ then stays an offset alone.
func (c *Calibration) fitOrth(cate []float64, x mat.Matrix) {
	n, _ := x.Dims()
	p := len(c.mean) + 1
	ztz, ztc := c.normal(x, cate, cate) // orth is nil: the rows [1, z]
	for j := range p {
		ztz.SetSym(j, j, ztz.At(j, j)*(1+1e-10)+1e-12)
	}
	var ch mat.Cholesky
	if !ch.Factorize(ztz) {
		return
	}
	var delta mat.VecDense
	if err := ch.SolveVecTo(&delta, ztc); err != nil {
		return
	}
	var ss, sc, mc float64
	for i := range n {
		mc += cate[i]
	}
	mc /= float64(n)
	zi := mat.NewVecDense(p, nil)
	for i := range n {
		c.row(zi.RawVector().Data, x, i, 0)
		u := cate[i] - mat.Dot(zi, &delta)
		ss += u * u
		sc += (cate[i] - mc) * (cate[i] - mc)
	}
	if !(ss > 1e-9*sc) || !(ss > 1e-24) {
		return
	}
	c.orth = slices.Clone(delta.RawVector().Data)
	c.orthScale = math.Sqrt(ss / float64(n-p))
}

// penalised is the ridge fit of the correction at one penalty: its
// normal matrix A factorised and inverted, its coefficients g, and its
// leave-one-out squared error.
type penalised struct {
	lambda float64
	ch     mat.Cholesky
	inv    mat.SymDense
	g      mat.VecDense
	loo    float64
}

// looErrors sets each fit's leave-one-out squared error,
// Σ ((r_i − z_iᵀg)/(1 − h_ii))², h_ii = z_iᵀA⁻¹z_i, in one pass over the
// design's rows a chunk at a time, each chunk's A⁻¹z_i one product.
func (c *Calibration) looErrors(x mat.Matrix, cate, r []float64, fits []*penalised) {
	p := fits[0].g.Len()
	var h mat.Dense
	c.chunks(x, cate, p, func(i0 int, zc *mat.Dense) {
		rows, _ := zc.Dims()
		for _, f := range fits {
			h.Reset()
			h.Mul(zc, &f.inv)
			g := f.g.RawVector().Data
			for i := range rows {
				zi, hi := zc.RawRowView(i), h.RawRowView(i)
				e := (r[i0+i] - floats.Dot(zi, g)) / (1 - floats.Dot(zi, hi))
				f.loo += e * e
			}
		}
	})
}

// sandwiches returns the heteroskedasticity-robust covariance of each
// fit's coefficients g, of residuals r on the design's rows (see normal):
// A⁻¹ (Σ e_i² z_i z_iᵀ) A⁻¹ · n/(n − p), the middle sum added a chunk of
// rows at a time.
func (c *Calibration) sandwiches(x mat.Matrix, cate, r []float64, fits ...*penalised) []*mat.SymDense {
	n, _ := x.Dims()
	p := fits[0].g.Len()
	meats := make([]*mat.SymDense, len(fits))
	for k := range meats {
		meats[k] = mat.NewSymDense(p, nil)
	}
	ez := mat.NewDense(min(n, calibrationChunk), p, nil)
	c.chunks(x, cate, p, func(i0 int, zc *mat.Dense) {
		rows, _ := zc.Dims()
		ec := ez.Slice(0, rows, 0, p).(*mat.Dense)
		for k, f := range fits {
			g := f.g.RawVector().Data
			for i := range rows {
				zi := zc.RawRowView(i)
				floats.ScaleTo(ec.RawRowView(i), r[i0+i]-floats.Dot(zi, g), zi)
			}
			meats[k].SymRankK(meats[k], 1, ec.T())
		}
	})
	out := make([]*mat.SymDense, len(fits))
	scale := float64(n) / float64(n-p)
	for k, f := range fits {
		var t, cov mat.Dense
		t.Mul(&f.inv, meats[k])
		cov.Mul(&t, &f.inv)
		out[k] = mat.NewSymDense(p, nil)
		for a := range p {
			for b := a; b < p; b++ {
				out[k].SetSym(a, b, scale*0.5*(cov.At(a, b)+cov.At(b, a)))
			}
		}
	}
	return out
}

// row fills dst with [1, (x_i − x̄)/s], then u_i of the estimate cate_i
// when u is in.
func (c *Calibration) row(dst []float64, x mat.Matrix, i int, cate float64) {
	dst[0] = 1
	for j := range c.mean {
		dst[j+1] = (x.At(i, j) - c.mean[j]) / c.scale[j]
	}
	if c.orth != nil {
		p := len(c.mean) + 1
		dst[p] = c.u(dst[:p], cate)
	}
}

// u returns u of the estimate cate of a row whose [1, z] is base.
func (c *Calibration) u(base []float64, cate float64) float64 {
	var fit float64
	for j, v := range c.orth {
		fit += v * base[j]
	}
	return (cate - fit) / c.orthScale
}

// Interval returns the corrected estimates of the rows of x, whose
// uncorrected estimates are cate, with their standard errors and Level
// intervals.
func (c *Calibration) Interval(cate []float64, x mat.Matrix) (tau, se, lower, upper []float64, err error) {
	n, d := x.Dims()
	if d != len(c.mean) || len(cate) != n {
		return nil, nil, nil, nil, fmt.Errorf("%w: %d estimates of %d rows in %d covariates; the correction has %d", ErrInput, len(cate), n, d, len(c.mean))
	}
	tau, se, lower, upper = mapped.Large(n), mapped.Large(n), mapped.Large(n), mapped.Large(n)
	zi := mat.NewVecDense(len(c.coef), nil)
	g := mat.NewVecDense(len(c.coef), c.coef)
	wald := g
	if c.wald != nil {
		wald = mat.NewVecDense(len(c.wald), c.wald)
	}
	for i := range n {
		c.row(zi.RawVector().Data, x, i, cate[i])
		tau[i] = cate[i] + c.Shrink*mat.Dot(zi, g)
		se[i] = math.Sqrt(max(0, mat.Inner(zi, c.cov, zi)))
		// The Wald interval of the least-penalised unshrunk estimate,
		// whose standard error se is, widened to hold the one reported.
		centre := cate[i] + mat.Dot(zi, wald)
		lower[i], upper[i] = min(centre-z*se[i], tau[i]), max(centre+z*se[i], tau[i])
	}
	return tau, se, lower, upper, nil
}

// CalibrationParams are the fitted values of a Calibration, to store it
// and rebuild it with NewCalibration: per covariate the mean and scale of
// the fitting rows; when u is in, the coefficients of τ̂ on [1, z] and
// u's scale; the coefficients γ0, γ (and κ), their covariance in
// row-major order, the penalty and the number of rows. Parameters stored
// before u existed have no Orth and rebuild the correction without it.
type CalibrationParams struct {
	Mean      []float64 `json:"mean"`
	Scale     []float64 `json:"scale"`
	Orth      []float64 `json:"orth,omitempty"`
	OrthScale float64   `json:"orth_scale,omitempty"`
	Coef      []float64 `json:"coef"`
	Wald      []float64 `json:"wald,omitempty"`
	Cov       []float64 `json:"cov"`
	Lambda    float64   `json:"lambda"`
	Shrink    float64   `json:"shrink"`
	N         int       `json:"n"`
}

// Params returns c's fitted values.
func (c *Calibration) Params() CalibrationParams {
	p := len(c.coef)
	cov := make([]float64, p*p)
	for a := range p {
		for b := range p {
			cov[a*p+b] = c.cov.At(a, b)
		}
	}
	return CalibrationParams{Mean: slices.Clone(c.mean), Scale: slices.Clone(c.scale), Orth: slices.Clone(c.orth), OrthScale: c.orthScale,
		Coef: slices.Clone(c.coef), Wald: slices.Clone(c.wald), Cov: cov, Lambda: c.Lambda, Shrink: c.Shrink, N: c.N}
}

// NewCalibration rebuilds a Calibration from its Params.
func NewCalibration(p CalibrationParams) (*Calibration, error) {
	d := len(p.Mean)
	k := d + 1
	if p.Orth != nil {
		k++
	}
	switch {
	case len(p.Scale) != d || len(p.Coef) != k || len(p.Cov) != k*k || p.Orth != nil && len(p.Orth) != d+1 || p.Wald != nil && len(p.Wald) != k:
		return nil, fmt.Errorf("%w: calibration of %d covariates with %d scales, %d coefficients of τ̂, %d coefficients and %d covariances",
			ErrInput, d, len(p.Scale), len(p.Orth), len(p.Coef), len(p.Cov))
	case !allFinite(p.Mean) || !allFinite(p.Scale) || !allFinite(p.Orth) || !allFinite(p.Coef) || !allFinite(p.Wald) || !allFinite(p.Cov):
		return nil, fmt.Errorf("%w: calibration with a value that is not finite", ErrInput)
	case p.Orth != nil && !(p.OrthScale > 0 && finite(p.OrthScale)):
		return nil, fmt.Errorf("%w: calibration with the scale %v of τ̂'s residual", ErrInput, p.OrthScale)
	case !(p.Shrink >= 0 && p.Shrink <= 1):
		return nil, fmt.Errorf("%w: calibration shrinkage %v outside [0, 1]", ErrInput, p.Shrink)
	}
	for _, s := range p.Scale {
		if !(s > 0) {
			return nil, fmt.Errorf("%w: calibration with scale %v", ErrInput, s)
		}
	}
	cov := mat.NewSymDense(k, nil)
	for a := range k {
		for b := a; b < k; b++ {
			if p.Cov[a*k+b] != p.Cov[b*k+a] {
				return nil, fmt.Errorf("%w: calibration covariance is not symmetric", ErrInput)
			}
			cov.SetSym(a, b, p.Cov[a*k+b])
		}
	}
	c := &Calibration{mean: slices.Clone(p.Mean), scale: slices.Clone(p.Scale), coef: slices.Clone(p.Coef), wald: slices.Clone(p.Wald), cov: cov,
		Lambda: p.Lambda, Shrink: p.Shrink, N: p.N}
	if p.Orth != nil {
		c.orth, c.orthScale = slices.Clone(p.Orth), p.OrthScale
	}
	return c, nil
}

func allFinite(v []float64) bool {
	for _, x := range v {
		if !finite(x) {
			return false
		}
	}
	return true
}
