package inference

import (
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
)

// Calibration is a doubly robust correction of a CATE estimate τ̂: the
// DR-learner (Kennedy 2020) with τ̂ as offset, a ridge regression of the
// residual pseudo-outcomes ψ_i − τ̂(x_i) on [1, x_i],
//
//	τ̃(x) = τ̂(x) + γ0 + γᵀ(x − x̄)/s,
//
// with the intercept unpenalised and the slopes penalised by λ, chosen
// among a grid by the leave-one-out error of the ridge fit, which has a
// closed form. E[ψ | x] = τ(x) when the nuisances behind ψ are right, so
// the correction removes what of τ − τ̂ is linear in x: all of a constant
// bias, and the attenuation of a linear effect.
//
// The correction is then shrunk toward none by the positive-part
// James–Stein factor c = max(0, 1 − (p − 2)/W), with W = γᵀV⁻¹γ the Wald
// statistic of its p = d + 1 coefficients under their sandwich covariance
// V: a correction that the rows show clearly (W ≫ p) is applied in full,
// and one within its own noise is not, so that pseudo-outcomes too noisy
// to say anything (few rows, poor overlap) leave τ̂ as it is.
//
// Interval returns τ̃(x), the shrunk estimate, with se(x), the sandwich
// standard error of the unshrunk correction at x taking τ̂ as fixed, and
// the Wald interval of the unshrunk estimate τ̂(x) + γ0 + γᵀ(x − x̄)/s ±
// 1.96·se(x), widened where needed to hold τ̃(x): its centre and its
// standard error are those of one estimator, and it covers τ(x) at least
// as often as that Wald interval, which it does where τ − τ̂ is linear in x
// and λ is small, and less often otherwise. Its coverage is a measured
// property, not a guarantee.
type Calibration struct {
	mean, scale []float64 // per covariate, of the fitting rows
	coef        []float64 // γ0, then γ
	cov         *mat.SymDense
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
	c := &Calibration{mean: make([]float64, d), scale: make([]float64, d), coef: make([]float64, p), N: n}
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
	z := mat.NewDense(n, p, nil)
	r := mat.NewVecDense(n, nil)
	for i := range n {
		if !finite(psi[i]) || !finite(cate[i]) {
			return nil, fmt.Errorf("%w: row %d: pseudo-outcome %v, estimate %v", ErrInput, i, psi[i], cate[i])
		}
		c.row(z.RawRowView(i), x, i)
		r.SetVec(i, psi[i]-cate[i])
	}
	var ztz mat.SymDense
	ztz.SymOuterK(1, z.T())
	var ztr mat.VecDense
	ztr.MulVec(z.T(), r)

	best := math.Inf(1)
	var bestA *mat.Cholesky
	for _, l := range calibrationGrid {
		a := mat.NewSymDense(p, nil)
		a.CopySym(&ztz)
		for j := 1; j < p; j++ {
			a.SetSym(j, j, a.At(j, j)+l*float64(n))
		}
		var ch mat.Cholesky
		if !ch.Factorize(a) {
			continue
		}
		var g mat.VecDense
		if err := ch.SolveVecTo(&g, &ztr); err != nil {
			continue
		}
		// Leave-one-out: (r_i − ŷ_i)/(1 − h_ii), h_ii = z_iᵀA⁻¹z_i.
		var loo float64
		var h mat.VecDense
		for i := range n {
			zi := mat.NewVecDense(p, z.RawRowView(i))
			if err := ch.SolveVecTo(&h, zi); err != nil {
				return nil, err
			}
			e := (r.AtVec(i) - mat.Dot(zi, &g)) / (1 - mat.Dot(zi, &h))
			loo += e * e
		}
		if loo < best {
			best, c.Lambda, bestA = loo, l, &ch
			copy(c.coef, g.RawVector().Data)
		}
	}
	if bestA == nil {
		return nil, fmt.Errorf("%w: the correction's normal equations are singular", ErrInput)
	}
	// Sandwich: A⁻¹ (Σ e_i² z_i z_iᵀ) A⁻¹ · n/(n − p).
	meat := mat.NewSymDense(p, nil)
	g := mat.NewVecDense(p, c.coef)
	for i := range n {
		zi := mat.NewVecDense(p, z.RawRowView(i))
		e := r.AtVec(i) - mat.Dot(zi, g)
		meat.SymRankOne(meat, e*e, zi)
	}
	var ainv mat.SymDense
	if err := bestA.InverseTo(&ainv); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	var t, cov mat.Dense
	t.Mul(&ainv, meat)
	cov.Mul(&t, &ainv)
	c.cov = mat.NewSymDense(p, nil)
	f := float64(n) / float64(n-p)
	for a := range p {
		for b := a; b < p; b++ {
			c.cov.SetSym(a, b, f*0.5*(cov.At(a, b)+cov.At(b, a)))
		}
	}
	c.Shrink = 1
	var vch mat.Cholesky
	if vch.Factorize(c.cov) {
		var vg mat.VecDense
		if err := vch.SolveVecTo(&vg, g); err == nil {
			if w := mat.Dot(g, &vg); w > 0 {
				c.Shrink = max(0, 1-float64(p-2)/w)
			}
		}
	}
	return c, nil
}

// row fills dst with [1, (x_i − x̄)/s].
func (c *Calibration) row(dst []float64, x mat.Matrix, i int) {
	dst[0] = 1
	for j := range c.mean {
		dst[j+1] = (x.At(i, j) - c.mean[j]) / c.scale[j]
	}
}

// Interval returns the corrected estimates of the rows of x, whose
// uncorrected estimates are cate, with their standard errors and Level
// intervals.
func (c *Calibration) Interval(cate []float64, x mat.Matrix) (tau, se, lower, upper []float64, err error) {
	n, d := x.Dims()
	if d != len(c.mean) || len(cate) != n {
		return nil, nil, nil, nil, fmt.Errorf("%w: %d estimates of %d rows in %d covariates; the correction has %d", ErrInput, len(cate), n, d, len(c.mean))
	}
	tau, se, lower, upper = make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	zi := mat.NewVecDense(d+1, nil)
	g := mat.NewVecDense(d+1, c.coef)
	for i := range n {
		c.row(zi.RawVector().Data, x, i)
		corr := mat.Dot(zi, g)
		tau[i] = cate[i] + c.Shrink*corr
		se[i] = math.Sqrt(max(0, mat.Inner(zi, c.cov, zi)))
		// The Wald interval of the unshrunk estimate, whose standard
		// error se is, widened to hold the shrunk one reported.
		centre := cate[i] + corr
		lower[i], upper[i] = min(centre-z*se[i], tau[i]), max(centre+z*se[i], tau[i])
	}
	return tau, se, lower, upper, nil
}

// CalibrationParams are the fitted values of a Calibration, to store it
// and rebuild it with NewCalibration: per covariate the mean and scale of
// the fitting rows, the coefficients γ0, γ, their (d+1)×(d+1) covariance in
// row-major order, the penalty and the number of rows.
type CalibrationParams struct {
	Mean   []float64 `json:"mean"`
	Scale  []float64 `json:"scale"`
	Coef   []float64 `json:"coef"`
	Cov    []float64 `json:"cov"`
	Lambda float64   `json:"lambda"`
	Shrink float64   `json:"shrink"`
	N      int       `json:"n"`
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
	return CalibrationParams{Mean: append([]float64(nil), c.mean...), Scale: append([]float64(nil), c.scale...),
		Coef: append([]float64(nil), c.coef...), Cov: cov, Lambda: c.Lambda, Shrink: c.Shrink, N: c.N}
}

// NewCalibration rebuilds a Calibration from its Params.
func NewCalibration(p CalibrationParams) (*Calibration, error) {
	d := len(p.Mean)
	k := d + 1
	switch {
	case len(p.Scale) != d || len(p.Coef) != k || len(p.Cov) != k*k:
		return nil, fmt.Errorf("%w: calibration of %d covariates with %d scales, %d coefficients and %d covariances",
			ErrInput, d, len(p.Scale), len(p.Coef), len(p.Cov))
	case !allFinite(p.Mean) || !allFinite(p.Scale) || !allFinite(p.Coef) || !allFinite(p.Cov):
		return nil, fmt.Errorf("%w: calibration with a value that is not finite", ErrInput)
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
	return &Calibration{mean: append([]float64(nil), p.Mean...), scale: append([]float64(nil), p.Scale...),
		coef: append([]float64(nil), p.Coef...), cov: cov, Lambda: p.Lambda, Shrink: p.Shrink, N: p.N}, nil
}

func allFinite(v []float64) bool {
	for _, x := range v {
		if !finite(x) {
			return false
		}
	}
	return true
}
