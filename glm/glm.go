// Package glm fits the two textbook regressions of causal inference on a
// few covariates: logistic regression (a propensity, or a binary
// outcome) and least squares, each with an intercept and a ridge penalty
// on the coefficients of the standardised covariates. They are the
// "simple" nuisance models beside which crffd's random-feature models are
// chosen (package estimator, CrossFit), and the propensity of the balance
// check (package balance). A differentially private site fits its
// nuisance models here too, from noised sufficient statistics (Stats,
// FitPrivate).
//
// A Model remembers the standardisation of the rows it was fitted on, so
// it predicts new rows on the same scale. Every function reads its
// arguments and allocates its results; none keeps a reference to them.
package glm

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"
)

// ErrNotConverged means that a logistic regression did not converge.
var ErrNotConverged = errors.New("glm: logistic regression did not converge")

// ErrShape means that the covariates, targets or rows disagree in size.
var ErrShape = errors.New("glm: shapes disagree")

const (
	maxIter = 100
	tol     = 1e-9
)

// Model is a fitted regression: the linear predictor η = β₀ + Σ βⱼ zⱼ of
// the standardised covariates zⱼ = (xⱼ − Mean[j])/Scale[j], and its mean,
// σ(η) for a logistic model and η for least squares.
type Model struct {
	Mean     []float64 `json:"mean"`  // each covariate's mean
	Scale    []float64 `json:"scale"` // each covariate's sd; 0: a constant column, left out
	Beta     []float64 `json:"beta"`  // the intercept, then one coefficient per covariate
	Logistic bool      `json:"logistic,omitempty"`
}

// Predict returns the model's mean for each row of x, in dst when it has
// room.
func (m *Model) Predict(dst []float64, x mat.Matrix) ([]float64, error) {
	n, d := x.Dims()
	if len(m.Scale) != len(m.Mean) || len(m.Beta) != len(m.Mean)+1 {
		// A model read back from a file may be damaged.
		return nil, fmt.Errorf("%w: a model of %d means, %d scales and %d coefficients", ErrShape, len(m.Mean), len(m.Scale), len(m.Beta))
	}
	if d != len(m.Mean) {
		return nil, fmt.Errorf("%w: %d covariates, the model has %d", ErrShape, d, len(m.Mean))
	}
	if cap(dst) < n {
		dst = make([]float64, n)
	}
	dst = dst[:n]
	for i := range n {
		eta := m.Beta[0]
		for j := range d {
			if m.Scale[j] > 0 {
				eta += m.Beta[j+1] * (x.At(i, j) - m.Mean[j]) / m.Scale[j]
			}
		}
		if m.Logistic {
			eta = 1 / (1 + math.Exp(-eta))
		}
		dst[i] = eta
	}
	return dst, nil
}

// designChunk is the most rows of the design matrix made at once; a
// variable so that tests can split a few rows into several chunks.
var designChunk = 1024

// design is the n×(d+1) design matrix of x, a column of ones, then x's
// columns standardised (a constant column becomes zeros), made a chunk of
// rows at a time as each pass over the rows reads it: a fit holds no copy
// of every row, only x itself, which it reads in place.
type design struct {
	x           mat.Matrix
	rows        mat.RawRowViewer // x's rows in place, when x gives them
	n, d        int
	mean, scale []float64
	buf         *mat.Dense // designChunk×(d+1): the chunk last made
}

// newDesign returns the design of x with the means and scales of its
// columns.
func newDesign(x mat.Matrix, targets int) (*design, error) {
	n, d := x.Dims()
	if targets != n {
		return nil, fmt.Errorf("%w: %d rows of covariates, %d targets", ErrShape, n, targets)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: no rows", ErrShape)
	}
	z := &design{x: x, n: n, d: d, mean: make([]float64, d), scale: make([]float64, d), buf: mat.NewDense(min(n, designChunk), d+1, nil)}
	z.rows, _ = x.(mat.RawRowViewer)
	col := make([]float64, n)
	for j := range d {
		if z.rows == nil {
			mat.Col(col, j, x)
		} else {
			for i := range col {
				col[i] = z.rows.RawRowView(i)[j]
			}
		}
		mu, sd := stat.MeanStdDev(col, nil)
		z.mean[j] = mu
		if sd > 0 { // else a constant column (or a single row)
			z.scale[j] = sd
		}
	}
	return z, nil
}

// chunk returns the design's rows [i0, min(n, i0+designChunk)), valid
// until the next call.
func (z *design) chunk(i0 int) *mat.Dense {
	i1 := min(z.n, i0+designChunk)
	c := z.buf.Slice(0, i1-i0, 0, z.d+1).(*mat.Dense)
	for i := i0; i < i1; i++ {
		row := c.RawRowView(i - i0)
		// x's row goes to the design row's tail, then is standardised
		// over itself.
		if z.rows != nil {
			copy(row[1:], z.rows.RawRowView(i))
		} else {
			mat.Row(row[1:], i, z.x)
		}
		row[0] = 1
		for j, v := range row[1:] {
			row[j+1] = 0
			if z.scale[j] > 0 {
				row[j+1] = (v - z.mean[j]) / z.scale[j]
			}
		}
	}
	return c
}

// chunks calls f with each chunk of the design in turn and the row its
// first row is.
func (z *design) chunks(f func(i0 int, c *mat.Dense)) {
	for i0 := 0; i0 < z.n; i0 += designChunk {
		f(i0, z.chunk(i0))
	}
}

// FitLinear fits least squares of y on the columns of x with an intercept
// and the penalty ridge/2·‖β₁:‖² on the standardised coefficients.
func FitLinear(x mat.Matrix, y []float64, ridge float64) (*Model, error) {
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fmt.Errorf("glm: target of row %d is %v", i, v)
		}
	}
	z, err := newDesign(x, len(y))
	if err != nil {
		return nil, err
	}
	k := z.d + 1
	// The normal equations, added a chunk of rows at a time.
	a := mat.NewSymDense(k, nil)
	b := mat.NewVecDense(k, nil)
	var zy mat.VecDense
	z.chunks(func(i0 int, c *mat.Dense) {
		r, _ := c.Dims()
		a.SymRankK(a, 1, c.T())
		zy.MulVec(c.T(), mat.NewVecDense(r, y[i0:i0+r]))
		b.AddVec(b, &zy)
	})
	for j := 1; j < k; j++ {
		a.SetSym(j, j, a.At(j, j)+ridge)
	}
	// A tiny jitter on the intercept keeps a single-row fit solvable.
	a.SetSym(0, 0, a.At(0, 0)+1e-12)
	var beta mat.VecDense
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return nil, errors.New("glm: least squares: the normal equations are singular")
	}
	if err := chol.SolveVecTo(&beta, b); err != nil {
		return nil, fmt.Errorf("glm: least squares: %w", err)
	}
	return &Model{Mean: z.mean, Scale: z.scale, Beta: append([]float64(nil), beta.RawVector().Data...)}, nil
}

// FitLogistic fits a logistic regression of w (each 0 or 1) on the
// columns of x, with an intercept and the penalty ridge/2·‖β₁:‖² on the
// standardised coefficients, by Newton's method with step halving. A
// positive ridge keeps the coefficients finite when a covariate
// separates the classes.
func FitLogistic(ctx context.Context, x mat.Matrix, w []float64, ridge float64) (*Model, error) {
	for i, v := range w {
		if v != 0 && v != 1 {
			return nil, fmt.Errorf("glm: row %d: %v is not 0 or 1", i, v)
		}
	}
	z, err := newDesign(x, len(w))
	if err != nil {
		return nil, err
	}
	mean, scale := z.mean, z.scale
	if treated := floats.Sum(w); treated == 0 || treated == float64(len(w)) {
		// One class alone: the likelihood has no maximum (the intercept
		// runs to ±∞). The covariates cannot tell anything, and the
		// intercept is the log odds of the share with half a row added
		// to each class (Jeffreys's prior), which stays finite.
		n := float64(len(w))
		beta := make([]float64, len(mean)+1)
		beta[0] = math.Log((treated + 0.5) / (n - treated + 0.5))
		return &Model{Mean: mean, Scale: scale, Beta: beta, Logistic: true}, nil
	}
	beta, err := newton(ctx, z, w, ridge)
	if err != nil {
		return nil, err
	}
	return &Model{Mean: mean, Scale: scale, Beta: beta, Logistic: true}, nil
}

// newton minimises penalisedLoss over β.
func newton(ctx context.Context, z *design, w []float64, ridge float64) ([]float64, error) {
	n, k := z.n, z.d+1
	beta := make([]float64, k)
	obj := func(b []float64) float64 { return penalisedLoss(z, w, b, ridge) }
	cur := obj(beta)
	g := make([]float64, k)
	h := mat.NewSymDense(k, nil)
	p := make([]float64, n)
	acc := make([]float64, k*k)
	next := make([]float64, k)
	for range maxIter {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		gradient(z, w, beta, p, g, ridge)
		hessian(z, p, h, acc, ridge)
		chol, err := damped(h)
		if err != nil {
			return nil, err
		}
		var step mat.VecDense
		if err := chol.SolveVecTo(&step, mat.NewVecDense(k, g)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotConverged, err)
		}
		t := 1.0
		for {
			for i := range k {
				next[i] = beta[i] + t*step.AtVec(i)
			}
			if v := obj(next); v <= cur || t < 1e-10 {
				cur = v
				break
			}
			t /= 2
		}
		moved := 0.0
		for i := range k {
			moved = math.Max(moved, math.Abs(next[i]-beta[i]))
		}
		copy(beta, next)
		if moved < tol {
			return beta, nil
		}
	}
	return nil, ErrNotConverged
}

// damped returns the Cholesky factor of h, or, where rounding leaves h
// short of positive definite, of h + μI for the least μ of a doubling
// sequence from 1e-10 of its largest diagonal entry that makes it so:
// with nearly separated classes every σ(η)(1 − σ(η)) underflows towards 0,
// and the intercept, which the ridge does not penalise, loses its
// curvature. The damped step is still a descent direction, and the step
// halving that follows keeps the loss from rising.
func damped(h *mat.SymDense) (*mat.Cholesky, error) {
	var chol mat.Cholesky
	if chol.Factorize(h) {
		return &chol, nil
	}
	k := h.SymmetricDim()
	top := 0.0
	for i := range k {
		top = math.Max(top, math.Abs(h.At(i, i)))
	}
	mu := 1e-10 * math.Max(top, 1)
	m := mat.NewSymDense(k, nil)
	for range 80 {
		m.CopySym(h)
		for i := range k {
			m.SetSym(i, i, h.At(i, i)+mu)
		}
		if chol.Factorize(m) {
			return &chol, nil
		}
		mu *= 2
	}
	return nil, fmt.Errorf("%w: the Hessian is not positive definite", ErrNotConverged)
}

// fitted sets p to σ(zβ).
func fitted(z *design, beta, p []float64) {
	z.chunks(func(i0 int, c *mat.Dense) {
		r, _ := c.Dims()
		for i := range r {
			p[i0+i] = 1 / (1 + math.Exp(-floats.Dot(c.RawRowView(i), beta)))
		}
	})
}

// penalisedLoss is the negative log-likelihood of β plus ridge/2·‖β₁:‖².
func penalisedLoss(z *design, w, beta []float64, ridge float64) float64 {
	k := z.d + 1
	l := 0.0
	z.chunks(func(i0 int, c *mat.Dense) {
		r, _ := c.Dims()
		for i := range r {
			eta := floats.Dot(c.RawRowView(i), beta)
			// log(1 + e^η) − wη, computed without overflow.
			l += math.Max(eta, 0) + math.Log1p(math.Exp(-math.Abs(eta))) - w[i0+i]*eta
		}
	})
	for j := 1; j < k; j++ {
		l += ridge / 2 * beta[j] * beta[j]
	}
	return l
}

// gradient sets p to σ(zβ) and g to the negative gradient of
// penalisedLoss: zᵀ(w − p) − ridge·β₁:.
func gradient(z *design, w, beta, p, g []float64, ridge float64) {
	fitted(z, beta, p)
	k := z.d + 1
	clear(g)
	z.chunks(func(i0 int, c *mat.Dense) {
		r, _ := c.Dims()
		for i := range r {
			row := c.RawRowView(i)
			res := w[i0+i] - p[i0+i]
			for j := range k {
				g[j] += row[j] * res
			}
		}
	})
	for j := 1; j < k; j++ {
		g[j] -= ridge * beta[j]
	}
}

// hessian sets h to the Hessian of penalisedLoss, zᵀ diag(p(1−p)) z plus
// ridge on the diagonal but for the intercept. acc is scratch of k²
// numbers, so that the loop over the rows does not go through h's
// accessors.
func hessian(z *design, p []float64, h *mat.SymDense, acc []float64, ridge float64) {
	k := z.d + 1
	clear(acc)
	z.chunks(func(i0 int, c *mat.Dense) {
		r, _ := c.Dims()
		for i := range r {
			row := c.RawRowView(i)
			s := p[i0+i] * (1 - p[i0+i])
			for a := range k {
				sa := s * row[a]
				if sa == 0 {
					continue
				}
				dst := acc[a*k : (a+1)*k]
				for b := a; b < k; b++ {
					dst[b] += sa * row[b]
				}
			}
		}
	})
	for a := range k {
		for b := a; b < k; b++ {
			h.SetSym(a, b, acc[a*k+b])
		}
	}
	for j := 1; j < k; j++ {
		h.SetSym(j, j, h.At(j, j)+ridge)
	}
}
