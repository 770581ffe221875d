package balance

import (
	"context"
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/stat"
)

// Ridge is the penalty λ of [Propensity] on the coefficients of the
// standardised covariates (not the intercept): λ/2·‖β‖². It changes
// nothing measurable on a few hundred rows, and keeps the coefficients
// finite when a covariate separates the arms.
const Ridge = 1.0

// ErrNotConverged means that the logistic regression did not converge.
var ErrNotConverged = errors.New("balance: propensity regression did not converge")

const (
	maxIter = 100
	tol     = 1e-9
)

// Propensity fits a logistic regression of w (0 or 1) on the columns of x,
// each standardised, with an intercept and the ridge penalty [Ridge], by
// Newton's method with step halving, and returns the fitted propensities.
func Propensity(ctx context.Context, x mat.Matrix, w []float64) ([]float64, error) {
	z, err := design(x, w)
	if err != nil {
		return nil, err
	}
	n, k := z.Dims()
	beta := make([]float64, k)
	obj := func(b []float64) float64 { return penalisedLoss(z, w, b) }
	cur := obj(beta)
	g := make([]float64, k)
	h := mat.NewSymDense(k, nil)
	p := make([]float64, n)
	acc := make([]float64, k*k)
	for range maxIter {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		gradient(z, w, beta, p, g)
		hessian(z, p, h, acc)
		var chol mat.Cholesky
		if !chol.Factorize(h) {
			return nil, fmt.Errorf("%w: the Hessian is not positive definite", ErrNotConverged)
		}
		var step mat.VecDense
		if err := chol.SolveVecTo(&step, mat.NewVecDense(k, g)); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrNotConverged, err)
		}
		t := 1.0
		next := make([]float64, k)
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
			fitted(z, beta, p)
			return p, nil
		}
	}
	return nil, ErrNotConverged
}

// design returns the n×(d+1) design matrix: an intercept column of ones,
// then x's columns standardised (a constant column becomes zeros).
func design(x mat.Matrix, w []float64) (*mat.Dense, error) {
	n, d := x.Dims()
	if len(w) != n {
		return nil, fmt.Errorf("%w: %d rows of covariates, %d treatments", ErrShape, n, len(w))
	}
	for i, v := range w {
		if v != 0 && v != 1 {
			return nil, fmt.Errorf("balance: row %d: treatment %v is not 0 or 1", i, v)
		}
	}
	z := mat.NewDense(n, d+1, nil)
	for i := range n {
		z.Set(i, 0, 1)
	}
	col := make([]float64, n)
	for j := range d {
		mat.Col(col, j, x)
		mean, sd := stat.MeanStdDev(col, nil)
		if !(sd > 0) {
			continue // a constant column (or a single row)
		}
		for i, v := range col {
			z.Set(i, j+1, (v-mean)/sd)
		}
	}
	return z, nil
}

// fitted sets p to σ(zβ).
func fitted(z *mat.Dense, beta, p []float64) {
	n, k := z.Dims()
	for i := range n {
		row := z.RawRowView(i)
		eta := 0.0
		for j := range k {
			eta += row[j] * beta[j]
		}
		p[i] = 1 / (1 + math.Exp(-eta))
	}
}

// penalisedLoss is the negative log-likelihood of β plus Ridge/2·‖β₁:‖².
func penalisedLoss(z *mat.Dense, w, beta []float64) float64 {
	n, k := z.Dims()
	l := 0.0
	for i := range n {
		row := z.RawRowView(i)
		eta := 0.0
		for j := range k {
			eta += row[j] * beta[j]
		}
		// log(1 + e^η) − wη, computed without overflow.
		l += math.Max(eta, 0) + math.Log1p(math.Exp(-math.Abs(eta))) - w[i]*eta
	}
	for j := 1; j < k; j++ {
		l += Ridge / 2 * beta[j] * beta[j]
	}
	return l
}

// gradient sets p to σ(zβ) and g to the negative gradient of penalisedLoss:
// zᵀ(w − p) − Ridge·β₁:.
func gradient(z *mat.Dense, w, beta, p, g []float64) {
	fitted(z, beta, p)
	n, k := z.Dims()
	clear(g)
	for i := range n {
		row := z.RawRowView(i)
		r := w[i] - p[i]
		for j := range k {
			g[j] += row[j] * r
		}
	}
	for j := 1; j < k; j++ {
		g[j] -= Ridge * beta[j]
	}
}

// hessian sets h to the Hessian of penalisedLoss, zᵀ diag(p(1−p)) z plus
// Ridge on the diagonal but for the intercept. acc is scratch of k² numbers,
// so that the loop over the rows does not go through h's accessors.
func hessian(z *mat.Dense, p []float64, h *mat.SymDense, acc []float64) {
	n, k := z.Dims()
	clear(acc)
	for i := range n {
		row := z.RawRowView(i)
		s := p[i] * (1 - p[i])
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
	for a := range k {
		for b := a; b < k; b++ {
			h.SetSym(a, b, acc[a*k+b])
		}
	}
	for j := 1; j < k; j++ {
		h.SetSym(j, j, h.At(j, j)+Ridge)
	}
}
