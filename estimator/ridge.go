package estimator

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/mat"
)

// RidgeStats are the sufficient statistics of a ridge regression of a
// target v on p features φ: n, Σφ, Σv, ΦᵀΦ and Φᵀv. They add over sites,
// so a federation solves the regression of the pooled rows from what each
// site sends, without sending a row. The DR-learner and T-learner
// candidates of model selection are fitted from them.
type RidgeStats struct {
	P         int
	N         float64
	FeatSum   []float64 // p: Σφ
	TargetSum float64   // Σv
	Gram      []float64 // p×p row-major: ΦᵀΦ
	Moment    []float64 // p: Φᵀv

	// Workspaces of AddRows, kept between calls: the selected rows and
	// their Gram matrix.
	sub, ff []float64
	g       gemm
}

// NewRidgeStats returns empty statistics for p features.
func NewRidgeStats(p int) *RidgeStats {
	return &RidgeStats{P: p, FeatSum: make([]float64, p), Gram: make([]float64, p*p), Moment: make([]float64, p)}
}

// AddRows adds the rows of phi (n×p) with targets v; rows, when not nil,
// selects the rows to add.
func (s *RidgeStats) AddRows(phi *mat.Dense, v []float64, rows []int) error {
	n, p := phi.Dims()
	if p != s.P || len(v) != n {
		return fmt.Errorf("estimator: ridge statistics of %d features: got %d×%d features and %d targets", s.P, n, p, len(v))
	}
	m := n
	if rows != nil {
		m = len(rows)
	}
	row := func(r int) int {
		if rows == nil {
			return r
		}
		return rows[r]
	}
	// Checked before anything is added, so that a refused call leaves s
	// as it was.
	for r := range m {
		i := row(r)
		if i < 0 || i >= n {
			return fmt.Errorf("estimator: ridge statistics: row %d of %d", i, n)
		}
		if math.IsNaN(v[i]) || math.IsInf(v[i], 0) {
			return fmt.Errorf("estimator: ridge statistics: target of row %d is %v", i, v[i])
		}
	}
	if m == 0 {
		return nil
	}
	// Every row, as they lie in phi; a selection, gathered first.
	sv := view(phi)
	if rows != nil {
		s.sub = grow(s.sub, m*p)
		for r, i := range rows {
			copy(s.sub[r*p:(r+1)*p], phi.RawRowView(i))
		}
		sv = strided{data: s.sub, rows: m, cols: p, rs: p, cs: 1}
	}
	for r := range m {
		i := row(r)
		for j, f := range phi.RawRowView(i) {
			s.FeatSum[j] += f
			s.Moment[j] += f * v[i]
		}
		s.TargetSum += v[i]
	}
	s.N += float64(m)
	// The package's gemm, not gonum's: for this Φᵀ·Φ of a few thousand
	// rows gonum's dgemm runs axpy kernels at a sixth of its speed.
	s.ff = grow(s.ff, p*p)
	s.g.mul(strided{data: s.ff, rows: p, cols: p, rs: p, cs: 1}, sv.t(), sv)
	floats.Add(s.Gram, s.ff)
	return nil
}

// grow returns buf resliced to n elements, reallocated when too small.
func grow(buf []float64, n int) []float64 {
	if cap(buf) < n {
		return make([]float64, n)
	}
	return buf[:n]
}

// Add adds o to s.
func (s *RidgeStats) Add(o *RidgeStats) error {
	if o == nil || o.P != s.P || len(o.Gram) != s.P*s.P || len(o.FeatSum) != s.P || len(o.Moment) != s.P {
		return errors.New("estimator: ridge statistics of different shapes")
	}
	s.N += o.N
	s.TargetSum += o.TargetSum
	for j := range s.FeatSum {
		s.FeatSum[j] += o.FeatSum[j]
		s.Moment[j] += o.Moment[j]
	}
	for j := range s.Gram {
		s.Gram[j] += o.Gram[j]
	}
	return nil
}

// Ridge is a fitted ridge regression: v̂ = Intercept + φᵀBeta.
type Ridge struct {
	Intercept float64
	Beta      []float64
}

// Solve fits the ridge regression with penalty lambda on Beta and an
// unpenalised intercept: it solves (Φcᵀ Φc + λI)β = Φcᵀ(v − v̄) on the
// centred features Φc, from the sums alone.
func (s *RidgeStats) Solve(lambda float64) (Ridge, error) {
	if s.N < 1 {
		return Ridge{}, errors.New("estimator: ridge regression of no rows")
	}
	if !(lambda > 0) {
		return Ridge{}, fmt.Errorf("estimator: ridge penalty %v must be positive", lambda)
	}
	p := s.P
	mean := make([]float64, p)
	for j := range mean {
		mean[j] = s.FeatSum[j] / s.N
	}
	vbar := s.TargetSum / s.N
	a := mat.NewSymDense(p, nil)
	rhs := mat.NewVecDense(p, nil)
	for j := range p {
		for k := j; k < p; k++ {
			v := s.Gram[j*p+k] - s.N*mean[j]*mean[k]
			if j == k {
				v += lambda
			}
			a.SetSym(j, k, v)
		}
		rhs.SetVec(j, s.Moment[j]-s.N*mean[j]*vbar)
	}
	var chol mat.Cholesky
	if !chol.Factorize(a) {
		return Ridge{}, errors.New("estimator: ridge system is not positive definite")
	}
	var beta mat.VecDense
	if err := chol.SolveVecTo(&beta, rhs); err != nil {
		return Ridge{}, fmt.Errorf("estimator: ridge regression: %w", err)
	}
	r := Ridge{Beta: make([]float64, p), Intercept: vbar}
	for j := range p {
		r.Beta[j] = beta.AtVec(j)
		r.Intercept -= mean[j] * r.Beta[j]
	}
	return r, nil
}

// Predict returns the fitted values of the rows of phi.
func (r Ridge) Predict(phi *mat.Dense) []float64 {
	n, _ := phi.Dims()
	out := make([]float64, n)
	b := mat.NewVecDense(len(r.Beta), r.Beta)
	for i := range n {
		row := phi.RawRowView(i)
		out[i] = r.Intercept + mat.Dot(mat.NewVecDense(len(row), row), b)
	}
	return out
}
